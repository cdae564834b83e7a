"""Where uploaded files' bytes live: a :class:`BlobStore`, one blob per file id.

:class:`LocalBlobStore` keeps each file in a directory (``$FERRYMAN_HOME/files`` by
default; replicas sharing state must share it, a network volume for instance):
written to a temporary file and renamed, so a reader never sees half a file and a
crash leaves no partial blob under a file's name. :class:`MemoryBlobStore` keeps
them in the process, for a server with no files directory (tests, embedded use).
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
from pathlib import Path
from typing import Protocol

from ferryman.errors import InvalidRequestError, NotFoundError

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,127}$")


def _checked(file_id: str) -> str:
    """``file_id`` if it can name a blob (letters, digits, ``_`` and ``-``: never a path)."""
    if not _SAFE_ID.match(file_id):
        raise InvalidRequestError("invalid file id", "file_id")
    return file_id


class BlobStore(Protocol):
    """File bytes by file id."""

    async def put(self, file_id: str, data: bytes) -> None:
        """Store (or replace) a file's bytes."""
        ...

    async def get(self, file_id: str) -> bytes:
        """A file's bytes, or NotFoundError."""
        ...

    async def delete(self, file_id: str) -> None:
        """Forget a file's bytes (nothing if absent)."""
        ...


class LocalBlobStore:
    """Blobs as files in a directory.

    Args:
        directory: Where the files go (created when first written).
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def _path(self, file_id: str) -> Path:
        return self.directory / _checked(file_id)

    async def put(self, file_id: str, data: bytes) -> None:
        """Write the bytes to a temporary file beside the blob, then rename it over the blob."""
        await asyncio.to_thread(self._write, self._path(file_id), data)

    def _write(self, path: Path, data: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".upload-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    async def get(self, file_id: str) -> bytes:
        """The blob's bytes."""
        path = self._path(file_id)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError as exc:
            raise NotFoundError(f"content of file '{file_id}' not found") from exc

    async def delete(self, file_id: str) -> None:
        """Remove the blob's file."""
        path = self._path(file_id)
        await asyncio.to_thread(path.unlink, True)


class MemoryBlobStore:
    """Blobs in this process's memory (lost when it stops)."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}

    async def put(self, file_id: str, data: bytes) -> None:
        """Keep the bytes."""
        self._blobs[_checked(file_id)] = bytes(data)

    async def get(self, file_id: str) -> bytes:
        """The bytes kept."""
        try:
            return self._blobs[_checked(file_id)]
        except KeyError as exc:
            raise NotFoundError(f"content of file '{file_id}' not found") from exc

    async def delete(self, file_id: str) -> None:
        """Forget the bytes."""
        self._blobs.pop(_checked(file_id), None)
