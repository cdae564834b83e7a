"""Vector stores under both APIs: stores, their files and batches, and direct chunk inserts.

Attaching a file only records an ingestion job; the :class:`~ferryman.knowledge.ingest.IngestionWorker`
(woken through ``wake``) reads, chunks and embeds it in the background. Llama Stack's vector-io and
RAG tool insert text synchronously instead (:meth:`VectorStoreService.insert_chunks`,
:meth:`VectorStoreService.insert_texts`).

A store's settings are a kernel record holding its owner (``storage.domain.vector_stores``). The access step
is explicit: a create stores the caller as owner in the record's own write; every other call checks the policy
against the stored owner before it reads or writes what the knowledge store keeps of the store (a store the
caller may not read looks missing), an update in the same write as its check; and a page passes the caller's
filter into the kernel's query.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

from pydantic import BaseModel

from ferryman.api.vector_stores import (
    AttachFileRequest,
    ChunkingStrategy,
    CreateFileBatchRequest,
    CreateVectorStoreRequest,
    FileContentPage,
    TextContent,
    UpdateVectorStoreRequest,
    VectorStore,
    VectorStoreDeleted,
    VectorStoreFile,
    VectorStoreFileBatch,
    VectorStoreFileDeleted,
    VectorStoreFileList,
    VectorStoreList,
)
from ferryman.auth.policy import Action
from ferryman.auth.principal import current_principal
from ferryman.errors import InvalidRequestError, NotFoundError
from ferryman.ids import new_id
from ferryman.inference.router import ModelRouter
from ferryman.knowledge.chunking import chunk_text, resolve_strategy
from ferryman.knowledge.embedding import embed_chunks, unit_bytes
from ferryman.knowledge.extract import without_nul
from ferryman.knowledge.views import batch_object, file_object, now, store_object
from ferryman.storage.base import Store
from ferryman.storage.domain.file_batches import batch_missing, file_batch
from ferryman.storage.domain.kinds import VECTOR_STORE
from ferryman.storage.domain.vector_stores import vector_stores
from ferryman.storage.kernel.model import PageOf
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.knowledge import (
    Attributes,
    ChunkRecord,
    FileBatchRecord,
    FileCounts,
    IngestionStatus,
    StoreFiles,
    VectorStoreFileRecord,
    VectorStoreRecord,
)

from .access import Access
from .checked_records import CheckedRecords
from .files import FileService
from .idempotency import Claim, answered, settlement, stored_record

_CONTENT_PAGE = 500


def _strategy(raw: ChunkingStrategy | None) -> dict[str, Any]:
    strategy: dict[str, Any] = resolve_strategy(raw.model_dump() if raw is not None else None)
    return strategy


def _page_ids(ids: list[str]) -> tuple[str | None, str | None]:
    return (ids[0], ids[-1]) if ids else (None, None)


class VectorStoreService:
    """Vector stores as the current caller.

    Args:
        store: The backend (this service checks the caller itself).
        kernel: Where the stores' records are.
        access: The access policy.
        models: Validates embedding models and embeds directly inserted text.
        files: The files, as the caller may read them (a store attaches only those).
        wake: Called when ingestion jobs were added, so the worker starts at once.
    """

    def __init__(
        self,
        store: Store,
        kernel: Kernel,
        access: Access,
        models: ModelRouter,
        files: FileService,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self._store = store
        self.records = vector_stores(kernel)
        self._checked = CheckedRecords(self.records, access)
        self._access = access
        self._models = models
        self._files = files
        self._wake = wake

    async def create(self, body: CreateVectorStoreRequest, key: Claim | None = None) -> VectorStore:
        """Create a store and attach its first files; ``key`` (the request's idempotency key) is claimed by the
        write that stores it, answered as this answers: each file waiting to be ingested.

        Raises:
            InvalidRequestError: an unknown or non-embedding model, or a dimension it does not have.
            NotFoundError: a file is unknown (or not the caller's to read).
            IdempotencyKeyHeldError: an earlier call with the key holds it (nothing is stored).
        """
        _, view = await self.created(body, key=key)
        return view

    async def created(
        self,
        body: CreateVectorStoreRequest,
        vector_store_id: str | None = None,
        provider_vector_db_id: str | None = None,
        key: Claim | None = None,
        shown: Callable[[VectorStoreRecord], BaseModel] | None = None,
    ) -> tuple[VectorStoreRecord, VectorStore]:
        """Create a store (its id the caller's, for Llama Stack's vector DBs) and attach its first files; its
        record, and the store as its write left it (each file waiting to be ingested).

        ``key`` (the request's idempotency key) is claimed by the write that stores the store, answered with it
        as ``shown`` shows it (default: as the store was written).

        Raises:
            IdempotencyKeyHeldError: an earlier call with the key holds it (nothing is stored).
            InvalidRequestError: an unknown or non-embedding model, or a dimension it does not have.
            NotFoundError: a file is unknown (or not the caller's to read).
            ConflictError: the id is taken.
        """
        model = self._models.embedding_model(body.embedding_model)
        dimension = _dimension(model.metadata.get("embedding_dimension"), body.embedding_dimension)
        strategy = _strategy(body.chunking_strategy)
        created = now()
        record = VectorStoreRecord(
            vector_store_id=vector_store_id or new_id("vs"),
            name=body.name or "",
            created_at=created,
            embedding_model=model.identifier,
            embedding_dimension=dimension,
            metadata=dict(body.metadata or {}),
            chunking_strategy=strategy,
            expires_after=body.expires_after.model_dump() if body.expires_after else None,
            last_active_at=created,
            provider_id=body.provider_id,
            provider_vector_db_id=provider_vector_db_id,
        )
        who = current_principal.get()
        self._access.check(who, "create", VECTOR_STORE, record.vector_store_id)
        files = [await self._attachment(record.vector_store_id, file_id, {}, strategy) for file_id in body.file_ids]
        # As written: each file waits to be ingested, and has no chunks yet.
        view = store_object(record, FileCounts(in_progress=len({f.file_id for f in files})), 0)
        settle = settlement(key, answered(view if shown is None else shown(record)))
        await self._store.create_vector_store(record, files, owner=self._access.owner(who), settle=settle)
        stored_record(key)
        self._access.record(who, "create", VECTOR_STORE, record.vector_store_id)
        if files:
            self._wake()
        return record, view

    async def record(self, vector_store_id: str, action: Action = "read") -> VectorStoreRecord:
        """A store's record, once the caller is allowed ``action`` on it.

        Raises:
            NotFoundError: it is missing, or the caller may not read it.
            ForbiddenError: the caller may read it but not do ``action``.
        """
        return await self._checked.get(current_principal.get(), vector_store_id, action)

    async def _allowed(self, vector_store_id: str, action: Action = "read") -> None:
        """Raise unless the caller may do ``action`` on the store; the server itself reads nothing for it (a
        store that is gone is then the knowledge store's NotFoundError, or an empty answer)."""
        if current_principal.get() is not None:
            await self.record(vector_store_id, action)

    async def touch(self, vector_store_id: str, at: int) -> None:
        """Record activity (``last_active_at``, the expiry's anchor) whoever acted: server machinery, unchecked."""
        await self.records.touch(vector_store_id, at)

    async def get(self, vector_store_id: str) -> VectorStore:
        """A store with its file counts, usage and status."""
        return await self._view(await self.record(vector_store_id))

    async def list(self, after: str | None, limit: int, order: str) -> VectorStoreList:
        """One page of the caller's stores."""
        page = await self.page(after, limit, order)
        totals = await self._store.store_files([record.vector_store_id for record in page.items])
        data = [_shown(record, totals[record.vector_store_id]) for record in page.items]
        first, last = _page_ids([s.id for s in data])
        return VectorStoreList(data=data, first_id=first, last_id=last, has_more=page.has_more)

    async def page(self, after: str | None, limit: int, order: str) -> PageOf[VectorStoreRecord]:
        """The records of one page of the stores the caller may read (filtered in the kernel's query), by
        creation, after the cursor's store, which is read in the same trip.

        Raises:
            NotFoundError: the cursor names no store the caller may read.
        """
        return await self._checked.page(current_principal.get(), after, limit, order)

    async def update(self, vector_store_id: str, body: UpdateVectorStoreRequest) -> VectorStore:
        """Change the fields the body sets (``expires_after: null`` clears the expiry)."""
        record = await self.record(vector_store_id, "update")
        given = body.model_fields_set
        changed: dict[str, Any] = {"last_active_at": now()}
        if "name" in given and body.name is not None:
            changed["name"] = body.name
        if "metadata" in given:
            changed["metadata"] = dict(body.metadata or {})
        if "expires_after" in given:
            changed["expires_after"] = body.expires_after.model_dump() if body.expires_after else None
        await self._checked.patch(current_principal.get(), vector_store_id, changed)
        return await self._view(replace(record, **changed))

    async def delete(self, vector_store_id: str) -> VectorStoreDeleted:
        """Delete a store with its attachments, batches and chunks (the files themselves stay)."""
        await self.record(vector_store_id, "delete")
        await self._store.delete_vector_store(vector_store_id)
        self._access.record(current_principal.get(), "delete", VECTOR_STORE, vector_store_id)
        return VectorStoreDeleted(id=vector_store_id)

    async def attach(self, vector_store_id: str, body: AttachFileRequest, key: Claim | None = None) -> VectorStoreFile:
        """Attach a file (ingested in the background); attaching it again re-ingests it. ``key`` (the request's
        idempotency key) is claimed by the write that attaches it, answered as this answers."""
        record = await self.record(vector_store_id, "update")
        strategy = _strategy(body.chunking_strategy) if body.chunking_strategy else record.chunking_strategy
        attachment = await self._attachment(vector_store_id, body.file_id, body.attributes or {}, strategy)
        answer = file_object(attachment)
        await self._store.add_vector_store_files(vector_store_id, [attachment], settlement(key, answered(answer)))
        stored_record(key)
        self._wake()
        return answer

    async def list_files(
        self,
        vector_store_id: str,
        after: str | None,
        limit: int,
        order: str,
        status: IngestionStatus | None = None,
        batch_id: str | None = None,
    ) -> VectorStoreFileList:
        """One page of a store's (or a batch's) files, optionally of one status."""
        await self._allowed(vector_store_id)
        page = await self._store.list_vector_store_files(vector_store_id, after, limit, order, status, batch_id)
        data = [file_object(record) for record in page.items]
        first, last = _page_ids([f.id for f in data])
        return VectorStoreFileList(data=data, first_id=first, last_id=last, has_more=page.has_more)

    async def get_file(self, vector_store_id: str, file_id: str) -> VectorStoreFile:
        """One attached file with its status."""
        await self._allowed(vector_store_id)
        return file_object(await self._store.get_vector_store_file(vector_store_id, file_id))

    async def update_file(self, vector_store_id: str, file_id: str, attributes: Attributes) -> VectorStoreFile:
        """Replace an attached file's attributes."""
        await self._allowed(vector_store_id, "update")
        await self._store.update_vector_store_file(vector_store_id, file_id, attributes)
        return file_object(await self._store.get_vector_store_file(vector_store_id, file_id))

    async def delete_file(self, vector_store_id: str, file_id: str) -> VectorStoreFileDeleted:
        """Detach a file and drop its chunks (the file itself stays)."""
        await self._allowed(vector_store_id, "update")
        await self._store.delete_vector_store_file(vector_store_id, file_id)
        return VectorStoreFileDeleted(id=file_id)

    async def file_content(self, vector_store_id: str, file_id: str) -> FileContentPage:
        """An attached file's text, chunk by chunk."""
        await self._allowed(vector_store_id)
        await self._store.get_vector_store_file(vector_store_id, file_id)
        chunks = [chunk async for page in self._chunk_pages(vector_store_id, file_id) for chunk in page]
        return FileContentPage(data=[TextContent(text=chunk.text) for chunk in chunks])

    async def chunks(self, vector_store_id: str, file_id: str) -> builtins.list[ChunkRecord]:
        """Every chunk of one file (or directly inserted document) of a store, in order."""
        await self._allowed(vector_store_id)
        return [chunk async for page in self._chunk_pages(vector_store_id, file_id) for chunk in page]

    async def _chunk_pages(self, vector_store_id: str, file_id: str) -> AsyncIterator[builtins.list[ChunkRecord]]:
        """One file's (or document's) chunks, a page at a time, in order."""
        after: int | None = None
        while True:
            page = await self._store.list_chunks(vector_store_id, file_id, after, _CONTENT_PAGE)
            if page.items:
                yield page.items
            if not page.has_more or not page.items:
                return
            after = page.items[-1].position

    async def create_batch(
        self, vector_store_id: str, body: CreateFileBatchRequest, key: Claim | None = None
    ) -> VectorStoreFileBatch:
        """Attach several files as one batch; ``key`` (the request's idempotency key) is claimed by the write that
        stores it, answered as this answers: each file waiting to be ingested."""
        if bool(body.file_ids) == bool(body.files):
            raise InvalidRequestError("give exactly one of file_ids and files, not empty", "file_ids")
        if body.files and (body.attributes or body.chunking_strategy):
            raise InvalidRequestError("with files, give attributes and chunking_strategy per file", "files")
        record = await self.record(vector_store_id, "update")
        default = _strategy(body.chunking_strategy) if body.chunking_strategy else record.chunking_strategy
        wanted = [(f, body.attributes or {}, default) for f in body.file_ids or []]
        for item in body.files or []:
            strategy = _strategy(item.chunking_strategy) if item.chunking_strategy else default
            wanted.append((item.file_id, item.attributes or {}, strategy))
        if len({file_id for file_id, _, _ in wanted}) != len(wanted):
            raise InvalidRequestError("a batch names each file once", "file_ids")
        batch = FileBatchRecord(batch_id=new_id("vsfb"), vector_store_id=vector_store_id, created_at=now())
        files = [await self._attachment(vector_store_id, f, a, s) for f, a, s in wanted]
        for attachment in files:
            attachment.batch_id = batch.batch_id
        answer = batch_object(batch, FileCounts(in_progress=len(files)))  # as written: each file in progress
        await self._store.add_vector_store_files(vector_store_id, files, settlement(key, answered(answer)), batch)
        stored_record(key)
        self._wake()
        return answer

    async def get_batch(self, vector_store_id: str, batch_id: str) -> VectorStoreFileBatch:
        """A batch with its status and counts."""
        await self._allowed(vector_store_id)
        return await self._batch(vector_store_id, batch_id)

    async def _batch(self, vector_store_id: str, batch_id: str) -> VectorStoreFileBatch:
        batch = await file_batch(self._store.kernel, vector_store_id, batch_id)
        return batch_object(batch, await self._store.file_counts(vector_store_id, batch_id))

    async def cancel_batch(self, vector_store_id: str, batch_id: str) -> VectorStoreFileBatch:
        """Cancel a batch: its files not yet ingested end ``cancelled``."""
        await self._allowed(vector_store_id, "update")
        try:
            await self._store.cancel_file_batch(vector_store_id, batch_id)
        except NotFoundError:  # the kernel's check names the batch alone
            raise batch_missing(vector_store_id, batch_id) from None
        return await self._batch(vector_store_id, batch_id)

    async def insert_chunks(
        self,
        vector_store_id: str,
        chunks: builtins.list[tuple[str, dict[str, Any], str, builtins.list[float] | None]],
    ) -> None:
        """Store chunks at once: ``(text, metadata, document_id, embedding)`` each (Llama Stack's vector-io insert).

        A chunk given its own ``embedding`` is stored with it, scaled to unit length; the others are embedded
        with the store's model. A chunk's metadata may name its ``chunk_id`` (a later insert with that id
        replaces it).

        Raises:
            InvalidRequestError: an embedding is not of the store's dimension, not finite, or zero.
        """
        record = await self.record(vector_store_id, "update")
        positions = {doc: await self._next_position(vector_store_id, doc) for doc in {c[2] for c in chunks}}
        given: builtins.list[ChunkRecord] = []
        drafts: builtins.list[ChunkRecord] = []
        for index, (text, metadata, document_id, embedding) in enumerate(chunks):
            position = positions[document_id]
            positions[document_id] = position + 1
            chunk_id = str(metadata.get("chunk_id") or new_id("chunk"))
            chunk = ChunkRecord(
                chunk_id, vector_store_id, document_id, position, without_nul(text), b"", 0, dict(metadata)
            )
            if embedding is None:
                drafts.append(chunk)
            else:
                given.append(replace(chunk, embedding=_given_embedding(embedding, record, index)))
        embedded = await embed_chunks(self._models, record, drafts) if drafts else []
        await self._store.add_chunks(vector_store_id, given + embedded)

    async def _next_position(self, vector_store_id: str, document_id: str) -> int:
        """The position after a document's last chunk, so a later insert for it continues its order."""
        last: int | None = None
        async for page in self._chunk_pages(vector_store_id, document_id):
            last = page[-1].position
        return 0 if last is None else last + 1

    async def insert_texts(
        self, vector_store_id: str, documents: builtins.list[tuple[str, str, dict[str, Any]]], chunk_tokens: int
    ) -> int:
        """Chunk, embed and store documents at once: ``(document_id, text, metadata)`` each (the RAG tool's insert).

        Chunks overlap by a quarter of ``chunk_tokens``, as Llama Stack's RAG tool does. Returns how many were stored.
        """
        if chunk_tokens < 1:
            raise InvalidRequestError("chunk size must be at least 1 token", "chunk_size_in_tokens")
        record = await self.record(vector_store_id, "update")
        drafts: builtins.list[ChunkRecord] = []
        for document_id, text, metadata in documents:
            # Tokenizing a long document takes a while: off the event loop.
            spans = await asyncio.to_thread(chunk_text, without_nul(text), chunk_tokens, chunk_tokens // 4)
            for position, span in enumerate(spans):
                meta = {**metadata, "document_id": document_id}
                chunk = ChunkRecord(
                    new_id("chunk"), vector_store_id, document_id, position, span.text, b"", span.token_count, meta
                )
                drafts.append(chunk)
        if drafts:
            await self._store.add_chunks(vector_store_id, await embed_chunks(self._models, record, drafts))
        return len(drafts)

    async def _attachment(
        self, vector_store_id: str, file_id: str, attributes: Attributes, strategy: dict[str, Any]
    ) -> VectorStoreFileRecord:
        await self._files.record(file_id)
        return VectorStoreFileRecord(
            vector_store_id=vector_store_id,
            file_id=file_id,
            created_at=now(),
            attributes=dict(attributes),
            chunking_strategy=strategy,
        )

    async def _view(self, record: VectorStoreRecord) -> VectorStore:
        totals = await self._store.store_files([record.vector_store_id])
        return _shown(record, totals[record.vector_store_id])


def _shown(record: VectorStoreRecord, totals: StoreFiles) -> VectorStore:
    return store_object(record, totals.counts, totals.usage_bytes)


def _dimension(model_dimension: Any, asked: int | None) -> int:
    if model_dimension is None:
        if asked is None:
            raise InvalidRequestError("embedding_dimension is required for this model", "embedding_dimension")
        return asked
    dimension = int(model_dimension)
    if asked is not None and asked != dimension:
        raise InvalidRequestError(
            f"embedding_dimension {asked} does not match the model's {dimension}", "embedding_dimension"
        )
    return dimension


def _given_embedding(vector: builtins.list[float], record: VectorStoreRecord, index: int) -> bytes:
    """A chunk's own embedding, checked against the store and scaled to unit length."""
    field = f"chunks[{index}].embedding"
    if len(vector) != record.embedding_dimension:
        raise InvalidRequestError(
            f"chunk {index}'s embedding has {len(vector)} dimensions; the vector DB's model "
            f"'{record.embedding_model}' has {record.embedding_dimension}",
            field,
        )
    import numpy as np  # with the first chunk given its embedding, not the server's start (numpy's 12 MiB)

    array = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(array))
    if not np.isfinite(array).all() or not np.isfinite(norm) or norm == 0.0:
        raise InvalidRequestError(f"chunk {index}'s embedding must be finite and not all zeros", field)
    return unit_bytes(vector)
