"""Uploaded files as one caller sees them: their metadata as kernel records, their bytes in a blob store.

The access step is explicit: an upload stores the caller as owner in the
record's own write, a read or a delete checks the policy against the owner
stored with the record (a file the caller may not read is missing to it), and a
page passes the caller's filter to storage, so a principal's page among many
others' files is one indexed query, not a scan.
"""

from __future__ import annotations

import builtins
import mimetypes

from ferryman.api.files import PURPOSES, FileDeleted, FileList, FileObject
from ferryman.api.limits import has_control_character
from ferryman.auth.policy import Action
from ferryman.auth.principal import current_principal
from ferryman.errors import InvalidRequestError, NotFoundError, PayloadTooLargeError
from ferryman.ids import new_hex
from ferryman.knowledge.blobs import BlobStore
from ferryman.knowledge.views import now
from ferryman.storage.base import IdempotencyStore
from ferryman.storage.domain.files import files
from ferryman.storage.domain.kinds import FILE
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Rec
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.knowledge import FileRecord, FileStore

from .access import Access
from .checked_records import read_page
from .idempotency import Claim, answered, keyed_write, settlement, stored_record

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
    return f"file-{new_hex()}"


class FileService:
    """Files as the current caller.

    Args:
        kernel: Where the files' records are.
        access: The access policy.
        attachments: The knowledge store, whose vector stores a deleted file leaves (with its chunks there).
        blobs: Where the bytes go.
        max_bytes: The largest file accepted.
        keyed: Where an upload stores its request's idempotency key with the file, in one write (None: keys are
            claimed and kept by the edge, apart from the file).
    """

    def __init__(
        self,
        kernel: Kernel,
        access: Access,
        attachments: FileStore,
        blobs: BlobStore,
        max_bytes: int = DEFAULT_MAX_BYTES,
        keyed: IdempotencyStore | None = None,
    ) -> None:
        self.records = files(kernel)
        self._keyed = keyed
        self._access = access
        self._attachments = attachments
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
        key: Claim | None = None,
    ) -> FileObject:
        """Store a file's bytes, then its record (a failed record leaves no blob behind) with ``key`` (its
        request's idempotency key, claimed by that write, answered with the file).

        Raises:
            IdempotencyKeyHeldError: an earlier call with the key holds it (nothing is stored).
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
        who = current_principal.get()
        self._access.check(who, "create", FILE, record.file_id)
        answer = file_object(record)
        write = keyed_write(self.records.kernel, self._keyed, settlement(key, answered(answer)))
        await self.blobs.put(record.file_id, data)
        try:
            # Leased until it expires: then the first replica's sweep (FileExpiry) claims and deletes it.
            await self.records.create(record, owner=self._access.owner(who), lease_until=record.expires_at, write=write)
        except BaseException:
            await self.blobs.delete(record.file_id)
            raise
        stored_record(key)
        self._access.record(who, "create", FILE, record.file_id)
        return answer

    async def get(self, file_id: str) -> FileObject:
        """One file (NotFoundError if unknown or unreadable)."""
        return file_object(await self.record(file_id))

    async def record(self, file_id: str, action: Action = "read") -> FileRecord:
        """One file's record, once the caller is allowed ``action`` on it.

        Raises:
            NotFoundError: it is missing, or the caller may not read it.
            ForbiddenError: the caller may read it but not do ``action``.
        """
        who = current_principal.get()
        found = await self.records.find(file_id)
        if found is None or expired(found.value):
            raise self._access.missing(who, action, FILE, file_id)
        self._access.check(who, action, FILE, file_id, found.rec.owner)
        return found.value

    async def readable_names(self, file_ids: builtins.list[str]) -> dict[str, str]:
        """The names of those of these files the caller may read, in one read, unaudited: a search names the
        files its chunks came from where it can, and a denial there is no request's."""
        if not file_ids:
            return {}
        allow = self._access.filter(current_principal.get(), "read", FILE)
        found = await self.records.kernel.read([ops.Get(FILE, file_id, allow=allow) for file_id in file_ids])
        values = [self.records.stored(rec).value for rec in found if rec is not None]
        return {value.file_id: value.filename for value in values if not expired(value)}

    async def list(self, purpose: str | None, after: str | None, limit: int, order: str) -> FileList:
        """One page of the caller's files (filtered in storage's query), by creation, after the cursor's file.

        Raises:
            InvalidRequestError: an unknown purpose.
            NotFoundError: the cursor names no file the caller may read.
        """
        if purpose is not None and purpose not in PURPOSES:
            raise InvalidRequestError(f"purpose must be one of {', '.join(PURPOSES)}", "purpose")
        who = current_principal.get()
        allow = self._access.filter(who, "read", FILE)
        where = None if purpose is None else ("purpose", purpose)
        live: builtins.list[FileRecord] = []
        cursor, more, first = after, True, True
        # One trip unless expired files the sweep has not deleted yet (missing already) thin a page: then more
        # pages are read until the page and one file beyond it are found, so has_more stays honest.
        while more and len(live) <= limit:
            page = ops.Page(FILE, allow=allow, where=where, after=cursor, limit=limit + 1 - len(live),
                            desc=order == "desc")  # fmt: skip
            if first:  # its cursor read in the same trip, and checked as a read of it is (a denial audited)
                found = await read_page(self.records.kernel, self._access, who, page, self._live)
            else:
                (found,) = await self.records.kernel.read([page])
            first = False
            values = [self.records.stored(rec).value for rec in found.items]
            live += [value for value in values if not expired(value)]
            cursor, more = (values[-1].file_id if values else cursor), found.has_more
        data = [file_object(record) for record in live[:limit]]
        ids = [f.id for f in data]
        return FileList(
            data=data, first_id=ids[0] if ids else None, last_id=ids[-1] if ids else None, has_more=len(live) > limit
        )

    def _live(self, rec: Rec) -> bool:
        """Whether a file's record is one to show (an expired file the sweep has not deleted yet is missing)."""
        return not expired(self.records.stored(rec).value)

    async def content(self, file_id: str) -> tuple[bytes, str]:
        """A file's bytes and media type."""
        record = await self.record(file_id)
        return await self.blobs.get(file_id), record.mime_type

    async def delete(self, file_id: str) -> FileDeleted:
        """Delete a file: it leaves every vector store (with its chunks there), then its bytes, then its record.

        Raises:
            NotFoundError: it is missing, or the caller may not read it.
            ForbiddenError: the caller may read it but not delete it.
        """
        await self.record(file_id, "delete")
        if not await self.remove(file_id):
            raise NotFoundError(f"file '{file_id}' not found")
        self._access.record(current_principal.get(), "delete", FILE, file_id)
        return FileDeleted(id=file_id)

    async def remove(self, file_id: str) -> bool:
        """Delete a file, unchecked: it leaves every vector store, then its bytes and its record go; whether its
        record was there."""
        # The record last: a delete that dies midway leaves it, to delete again (or to claim again, expiring),
        # never chunks or bytes of a file that is gone.
        await self._attachments.forget_file(file_id)
        await self.blobs.delete(file_id)
        return await self.records.delete(file_id)


def expired(record: FileRecord) -> bool:
    """Whether a file's expiry has come: then it is missing to every caller, before the sweep deletes it."""
    return record.expired_at(now())


def _mime(filename: str, given: str | None) -> str:
    if given and given != "application/octet-stream":
        return given.split(";", 1)[0].strip() or "application/octet-stream"
    guessed, _ = mimetypes.guess_type(filename)
    return guessed or "application/octet-stream"
