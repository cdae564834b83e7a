"""Uploaded files: their metadata in the (owned) store, their bytes in a blob store."""

from __future__ import annotations

import mimetypes
import uuid

from ferryman.api.files import PURPOSES, FileDeleted, FileList, FileObject
from ferryman.api.limits import has_control_character
from ferryman.errors import InvalidRequestError, PayloadTooLargeError
from ferryman.knowledge.blobs import BlobStore
from ferryman.knowledge.views import now
from ferryman.storage.base import Store
from ferryman.storage.knowledge import FileRecord

DEFAULT_MAX_BYTES = 512 * 1024 * 1024
MAX_FILENAME = 512


def file_object(record: FileRecord) -> FileObject:
    """A file on the wire."""
    return FileObject(
        id=record.file_id,
        bytes=record.bytes,
        created_at=record.created_at,
        filename=record.filename,
        purpose=record.purpose,
        expires_at=record.expires_at,
    )


def new_file_id() -> str:
    """A fresh file id in OpenAI's form (``file-…``)."""
    return f"file-{uuid.uuid4().hex}"


class FileService:
    """Files as the current caller.

    Args:
        store: The (owned) store of file records.
        blobs: Where the bytes go.
        max_bytes: The largest file accepted.
    """

    def __init__(self, store: Store, blobs: BlobStore, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._store = store
        self.blobs = blobs
        self.max_bytes = max_bytes

    def too_large(self) -> PayloadTooLargeError:
        """The 413 of a file over ``max_bytes``."""
        return PayloadTooLargeError(
            f"the file is larger than the limit of {self.max_bytes} bytes (files.max_bytes)", "file"
        )

    async def upload(
        self,
        filename: str,
        data: bytes,
        purpose: str,
        mime_type: str | None = None,
        expires_after_seconds: int | None = None,
    ) -> FileObject:
        """Store a file's bytes, then its record (a failed record leaves no blob behind).

        Raises:
            InvalidRequestError: an unknown purpose, an empty file, a bad filename or expiry.
            PayloadTooLargeError: the file is larger than ``max_bytes``.
        """
        if purpose not in PURPOSES:
            raise InvalidRequestError(f"purpose must be one of {', '.join(PURPOSES)}", "purpose")
        if not data:
            raise InvalidRequestError("the file is empty", "file")
        if len(data) > self.max_bytes:
            raise self.too_large()
        name = filename.replace("\\", "/").rsplit("/", 1)[-1].strip()
        if not name or len(name) > MAX_FILENAME:
            raise InvalidRequestError(f"the file needs a name of 1 to {MAX_FILENAME} characters", "file")
        if has_control_character(name):
            raise InvalidRequestError("the file's name must not contain control characters", "file")
        if expires_after_seconds is not None and not 3600 <= expires_after_seconds <= 30 * 86400:
            raise InvalidRequestError("expires_after[seconds] must be between 3600 and 2592000", "expires_after")
        created = now()
        record = FileRecord(
            file_id=new_file_id(),
            filename=name,
            purpose=purpose,
            bytes=len(data),
            created_at=created,
            mime_type=_mime(name, mime_type),
            expires_at=created + expires_after_seconds if expires_after_seconds is not None else None,
        )
        await self.blobs.put(record.file_id, data)
        try:
            await self._store.create_file(record)
        except BaseException:
            await self.blobs.delete(record.file_id)
            raise
        return file_object(record)

    async def get(self, file_id: str) -> FileObject:
        """One file (NotFoundError if unknown or unreadable)."""
        return file_object(await self._store.get_file(file_id))

    async def record(self, file_id: str) -> FileRecord:
        """One file's record."""
        return await self._store.get_file(file_id)

    async def list(self, purpose: str | None, after: str | None, limit: int, order: str) -> FileList:
        """One page of the caller's files."""
        if purpose is not None and purpose not in PURPOSES:
            raise InvalidRequestError(f"purpose must be one of {', '.join(PURPOSES)}", "purpose")
        page = await self._store.list_files(purpose, after, limit, order)
        data = [file_object(record) for record in page.items]
        ids = [f.id for f in data]
        return FileList(
            data=data, first_id=ids[0] if ids else None, last_id=ids[-1] if ids else None, has_more=page.has_more
        )

    async def content(self, file_id: str) -> tuple[bytes, str]:
        """A file's bytes and media type."""
        record = await self._store.get_file(file_id)
        return await self.blobs.get(file_id), record.mime_type

    async def delete(self, file_id: str) -> FileDeleted:
        """Delete a file: its record and its chunks in every vector store, then its bytes."""
        await self._store.delete_file(file_id)
        await self.blobs.delete(file_id)
        return FileDeleted(id=file_id)


def _mime(filename: str, given: str | None) -> str:
    if given and given != "application/octet-stream":
        return given.split(";", 1)[0].strip() or "application/octet-stream"
    guessed, _ = mimetypes.guess_type(filename)
    return guessed or "application/octet-stream"
