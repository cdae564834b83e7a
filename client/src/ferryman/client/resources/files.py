"""The Files API: upload, list, read and delete files."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from ferryman.api.files import FileDeleted, FileList, FileObject

from .._pagination import AsyncPage, SyncPage, by_cursor
from .._parsing import model
from .._transport import Call, RequestPlan, path
from ._base import AsyncResource, SyncResource

FileInput = bytes | str | Path | IO[bytes] | tuple[str, bytes]
"""A file to upload: its bytes, a path, an open binary file, or ``(filename, bytes)``."""

_FILE = "/v1/files/{}"


def _named_bytes(file: FileInput) -> tuple[str, bytes]:
    """The file's name and bytes, read once so that a retry sends them again."""
    if isinstance(file, tuple):
        return file
    if isinstance(file, str | Path):
        source = Path(file)
        return source.name, source.read_bytes()
    if isinstance(file, bytes):
        return "upload", file
    return Path(str(getattr(file, "name", "upload"))).name, file.read()


def _upload(file: FileInput, purpose: str, expires_after: Mapping[str, Any] | None) -> Call[FileObject]:
    name, content = _named_bytes(file)
    data: dict[str, Any] = {"purpose": purpose}
    if expires_after is not None:
        data.update({f"expires_after[{key}]": str(value) for key, value in expires_after.items()})
    plan = RequestPlan("POST", "/v1/files", files={"file": (name, content)}, data=data, idempotent=True)
    return Call(plan, model(FileObject))


def _list(purpose: str | None, limit: int | None, order: str | None, after: str | None) -> RequestPlan:
    return RequestPlan("GET", "/v1/files", params={"purpose": purpose, "limit": limit, "order": order, "after": after})


def _content(response: Any) -> bytes:
    return bytes(response.content)


class Files(SyncResource):
    """``client.files``."""

    def create(self, file: FileInput, *, purpose: str = "assistants",
               expires_after: Mapping[str, Any] | None = None) -> FileObject:  # fmt: skip
        """Upload a file."""
        return self._transport.call(_upload(file, purpose, expires_after))

    def retrieve(self, file_id: str) -> FileObject:
        """One file's record."""
        return self._transport.call(Call(RequestPlan("GET", path(_FILE, file_id)), model(FileObject)))

    def content(self, file_id: str) -> bytes:
        """One file's bytes."""
        return self._transport.call(Call(RequestPlan("GET", path(_FILE + "/content", file_id)), _content))

    def list(self, *, purpose: str | None = None, limit: int | None = None, order: str | None = None,
             after: str | None = None) -> SyncPage[FileObject]:  # fmt: skip
        """The files, a page at a time (iterate the page for all of them)."""
        return SyncPage.fetch(self._transport, _list(purpose, limit, order, after), by_cursor(FileList))

    def delete(self, file_id: str) -> FileDeleted:
        """Delete a file (and detach it from every vector store)."""
        return self._transport.call(Call(RequestPlan("DELETE", path(_FILE, file_id)), model(FileDeleted)))


class AsyncFiles(AsyncResource):
    """``client.files`` of an ``AsyncClient``."""

    async def create(self, file: FileInput, *, purpose: str = "assistants",
                     expires_after: Mapping[str, Any] | None = None) -> FileObject:  # fmt: skip
        """Upload a file."""
        return await self._transport.call(_upload(file, purpose, expires_after))

    async def retrieve(self, file_id: str) -> FileObject:
        """One file's record."""
        return await self._transport.call(Call(RequestPlan("GET", path(_FILE, file_id)), model(FileObject)))

    async def content(self, file_id: str) -> bytes:
        """One file's bytes."""
        return await self._transport.call(Call(RequestPlan("GET", path(_FILE + "/content", file_id)), _content))

    async def list(self, *, purpose: str | None = None, limit: int | None = None, order: str | None = None,
                   after: str | None = None) -> AsyncPage[FileObject]:  # fmt: skip
        """The files, a page at a time (``async for`` over the page for all of them)."""
        return await AsyncPage.fetch(self._transport, _list(purpose, limit, order, after), by_cursor(FileList))

    async def delete(self, file_id: str) -> FileDeleted:
        """Delete a file (and detach it from every vector store)."""
        return await self._transport.call(Call(RequestPlan("DELETE", path(_FILE, file_id)), model(FileDeleted)))
