"""The Vector Stores API: stores, their files and file batches, and search."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ferryman.api.vector_stores import (
    FileContentPage,
    SearchResultsPage,
    VectorStore,
    VectorStoreDeleted,
    VectorStoreFile,
    VectorStoreFileBatch,
    VectorStoreFileDeleted,
    VectorStoreFileList,
    VectorStoreList,
)

from .._pagination import AsyncPage, SyncPage, by_cursor
from .._parsing import body, model
from .._transport import AsyncTransport, Call, RequestPlan, SyncTransport, path
from ._base import AsyncResource, SyncResource, route_call

_VS = "/v1/vector_stores/{}"
_FILE = _VS + "/files/{}"
_BATCH = _VS + "/file_batches/{}"


def _paging(limit: int | None, order: str | None, after: str | None, **more: Any) -> dict[str, Any]:
    return {"limit": limit, "order": order, "after": after, **more}


def _create(options: Mapping[str, Any]) -> Call[VectorStore]:
    return Call(RequestPlan("POST", "/v1/vector_stores", json=body(**options), idempotent=True), model(VectorStore))


def _update(vector_store_id: str, options: Mapping[str, Any]) -> Call[VectorStore]:
    # Sent as given: ``expires_after=None`` clears the expiry.
    return Call(RequestPlan("POST", path(_VS, vector_store_id), json=dict(options)), model(VectorStore))


def _search(vector_store_id: str, query: str | Sequence[str], options: Mapping[str, Any]) -> Call[SearchResultsPage]:
    plan = RequestPlan("POST", path(_VS + "/search", vector_store_id), json=body(query=query, **options))
    return Call(plan, model(SearchResultsPage))


def _attach(vector_store_id: str, file_id: str, options: Mapping[str, Any]) -> Call[VectorStoreFile]:
    plan = RequestPlan("POST", path(_VS + "/files", vector_store_id), json=body(file_id=file_id, **options),
                       idempotent=True)  # fmt: skip
    return Call(plan, model(VectorStoreFile))


def _create_batch(vector_store_id: str, options: Mapping[str, Any]) -> Call[VectorStoreFileBatch]:
    plan = RequestPlan("POST", path(_VS + "/file_batches", vector_store_id), json=body(**options), idempotent=True)
    return Call(plan, model(VectorStoreFileBatch))


def _listing(template: str, params: Mapping[str, Any], *ids: str) -> RequestPlan:
    return RequestPlan("GET", path(template, *ids), params=params)


class VectorStores(SyncResource):
    """``client.vector_stores``, with ``files`` and ``file_batches`` beneath."""

    def __init__(self, transport: SyncTransport) -> None:
        super().__init__(transport)
        self.files = VectorStoreFiles(transport)
        self.file_batches = FileBatches(transport)

    def create(self, **options: Any) -> VectorStore:
        """Create a store (``name``, ``file_ids``, ``chunking_strategy``, ``metadata``, ``embedding_model``…)."""
        return self._transport.call(_create(options))

    def retrieve(self, vector_store_id: str) -> VectorStore:
        """One store."""
        return self._transport.call(route_call("GET", _VS, VectorStore, vector_store_id))

    def update(self, vector_store_id: str, **changes: Any) -> VectorStore:
        """Change a store's ``name``, ``metadata`` or ``expires_after``."""
        return self._transport.call(_update(vector_store_id, changes))

    def list(self, *, limit: int | None = None, order: str | None = None,
             after: str | None = None) -> SyncPage[VectorStore]:  # fmt: skip
        """The stores, a page at a time (iterate the page for all of them)."""
        plan = _listing("/v1/vector_stores", _paging(limit, order, after))
        return SyncPage.fetch(self._transport, plan, by_cursor(VectorStoreList))

    def delete(self, vector_store_id: str) -> VectorStoreDeleted:
        """Delete a store with its chunks."""
        return self._transport.call(route_call("DELETE", _VS, VectorStoreDeleted, vector_store_id))

    def search(self, vector_store_id: str, *, query: str | Sequence[str], **options: Any) -> SearchResultsPage:
        """Search a store (``filters``, ``max_num_results``, ``ranking_options``, ``rewrite_query``…)."""
        return self._transport.call(_search(vector_store_id, query, options))


class VectorStoreFiles(SyncResource):
    """``client.vector_stores.files``."""

    def create(self, vector_store_id: str, *, file_id: str, **options: Any) -> VectorStoreFile:
        """Attach a file (``attributes``, ``chunking_strategy``); it is ingested in the background."""
        return self._transport.call(_attach(vector_store_id, file_id, options))

    def retrieve(self, vector_store_id: str, file_id: str) -> VectorStoreFile:
        """One attached file, with its ingestion status."""
        return self._transport.call(route_call("GET", _FILE, VectorStoreFile, vector_store_id, file_id))

    def update(self, vector_store_id: str, file_id: str, *, attributes: Mapping[str, Any]) -> VectorStoreFile:
        """Replace an attached file's attributes."""
        plan = RequestPlan("POST", path(_FILE, vector_store_id, file_id), json={"attributes": dict(attributes)})
        return self._transport.call(Call(plan, model(VectorStoreFile)))

    def content(self, vector_store_id: str, file_id: str) -> FileContentPage:
        """An attached file's chunks."""
        return self._transport.call(route_call("GET", _FILE + "/content", FileContentPage, vector_store_id, file_id))

    def list(self, vector_store_id: str, *, limit: int | None = None, order: str | None = None,
             after: str | None = None, filter: str | None = None) -> SyncPage[VectorStoreFile]:  # fmt: skip
        """A store's files (``filter`` by status), a page at a time."""
        plan = _listing(_VS + "/files", _paging(limit, order, after, filter=filter), vector_store_id)
        return SyncPage.fetch(self._transport, plan, by_cursor(VectorStoreFileList))

    def delete(self, vector_store_id: str, file_id: str) -> VectorStoreFileDeleted:
        """Detach a file from a store."""
        return self._transport.call(route_call("DELETE", _FILE, VectorStoreFileDeleted, vector_store_id, file_id))


class FileBatches(SyncResource):
    """``client.vector_stores.file_batches``."""

    def create(self, vector_store_id: str, **options: Any) -> VectorStoreFileBatch:
        """Attach several files (``file_ids`` or ``files``, ``attributes``, ``chunking_strategy``)."""
        return self._transport.call(_create_batch(vector_store_id, options))

    def retrieve(self, vector_store_id: str, batch_id: str) -> VectorStoreFileBatch:
        """One batch, with its file counts."""
        return self._transport.call(route_call("GET", _BATCH, VectorStoreFileBatch, vector_store_id, batch_id))

    def cancel(self, vector_store_id: str, batch_id: str) -> VectorStoreFileBatch:
        """Cancel the batch's files not yet ingested."""
        return self._transport.call(
            route_call("POST", _BATCH + "/cancel", VectorStoreFileBatch, vector_store_id, batch_id)
        )

    def list_files(self, vector_store_id: str, batch_id: str, *, limit: int | None = None, order: str | None = None,
                   after: str | None = None, filter: str | None = None) -> SyncPage[VectorStoreFile]:  # fmt: skip
        """A batch's files, a page at a time."""
        plan = _listing(_BATCH + "/files", _paging(limit, order, after, filter=filter), vector_store_id, batch_id)
        return SyncPage.fetch(self._transport, plan, by_cursor(VectorStoreFileList))


class AsyncVectorStores(AsyncResource):
    """``client.vector_stores`` of an ``AsyncClient``."""

    def __init__(self, transport: AsyncTransport) -> None:
        super().__init__(transport)
        self.files = AsyncVectorStoreFiles(transport)
        self.file_batches = AsyncFileBatches(transport)

    async def create(self, **options: Any) -> VectorStore:
        """Create a store (``name``, ``file_ids``, ``chunking_strategy``, ``metadata``, ``embedding_model``…)."""
        return await self._transport.call(_create(options))

    async def retrieve(self, vector_store_id: str) -> VectorStore:
        """One store."""
        return await self._transport.call(route_call("GET", _VS, VectorStore, vector_store_id))

    async def update(self, vector_store_id: str, **changes: Any) -> VectorStore:
        """Change a store's ``name``, ``metadata`` or ``expires_after``."""
        return await self._transport.call(_update(vector_store_id, changes))

    async def list(self, *, limit: int | None = None, order: str | None = None,
                   after: str | None = None) -> AsyncPage[VectorStore]:  # fmt: skip
        """The stores, a page at a time."""
        plan = _listing("/v1/vector_stores", _paging(limit, order, after))
        return await AsyncPage.fetch(self._transport, plan, by_cursor(VectorStoreList))

    async def delete(self, vector_store_id: str) -> VectorStoreDeleted:
        """Delete a store with its chunks."""
        return await self._transport.call(route_call("DELETE", _VS, VectorStoreDeleted, vector_store_id))

    async def search(self, vector_store_id: str, *, query: str | Sequence[str], **options: Any) -> SearchResultsPage:
        """Search a store (see ``VectorStores.search``)."""
        return await self._transport.call(_search(vector_store_id, query, options))


class AsyncVectorStoreFiles(AsyncResource):
    """``client.vector_stores.files`` of an ``AsyncClient``."""

    async def create(self, vector_store_id: str, *, file_id: str, **options: Any) -> VectorStoreFile:
        """Attach a file; it is ingested in the background."""
        return await self._transport.call(_attach(vector_store_id, file_id, options))

    async def retrieve(self, vector_store_id: str, file_id: str) -> VectorStoreFile:
        """One attached file, with its ingestion status."""
        return await self._transport.call(route_call("GET", _FILE, VectorStoreFile, vector_store_id, file_id))

    async def content(self, vector_store_id: str, file_id: str) -> FileContentPage:
        """An attached file's chunks."""
        return await self._transport.call(
            route_call("GET", _FILE + "/content", FileContentPage, vector_store_id, file_id)
        )

    async def list(self, vector_store_id: str, *, limit: int | None = None, order: str | None = None,
                   after: str | None = None, filter: str | None = None) -> AsyncPage[VectorStoreFile]:  # fmt: skip
        """A store's files, a page at a time."""
        plan = _listing(_VS + "/files", _paging(limit, order, after, filter=filter), vector_store_id)
        return await AsyncPage.fetch(self._transport, plan, by_cursor(VectorStoreFileList))

    async def delete(self, vector_store_id: str, file_id: str) -> VectorStoreFileDeleted:
        """Detach a file from a store."""
        return await self._transport.call(route_call("DELETE", _FILE, VectorStoreFileDeleted, vector_store_id, file_id))


class AsyncFileBatches(AsyncResource):
    """``client.vector_stores.file_batches`` of an ``AsyncClient``."""

    async def create(self, vector_store_id: str, **options: Any) -> VectorStoreFileBatch:
        """Attach several files."""
        return await self._transport.call(_create_batch(vector_store_id, options))

    async def retrieve(self, vector_store_id: str, batch_id: str) -> VectorStoreFileBatch:
        """One batch, with its file counts."""
        return await self._transport.call(route_call("GET", _BATCH, VectorStoreFileBatch, vector_store_id, batch_id))

    async def cancel(self, vector_store_id: str, batch_id: str) -> VectorStoreFileBatch:
        """Cancel the batch's files not yet ingested."""
        return await self._transport.call(
            route_call("POST", _BATCH + "/cancel", VectorStoreFileBatch, vector_store_id, batch_id)
        )
