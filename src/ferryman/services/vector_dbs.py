"""Llama Stack's vector DBs, vector I/O and RAG tool over the knowledge services.

A vector DB is a vector store whose id the caller chose (``vector_db_id``);
its chunks are inserted and embedded synchronously, and searched through the
same :class:`~ferryman.knowledge.search.SearchService` as OpenAI's API.
"""

from __future__ import annotations

from typing import Any

from ferryman.api.agents import Document
from ferryman.api.content import content_to_text
from ferryman.api.limits import MAX_ID_CHARS, has_control_character
from ferryman.api.vector_io import Chunk as WireChunk
from ferryman.api.vector_io import (
    InsertChunksRequest,
    QueryChunksRequest,
    QueryChunksResponse,
    RagInsertRequest,
    RAGQueryConfig,
    RagQueryRequest,
    RAGQueryResult,
    RegisterVectorDbRequest,
    VectorDB,
)
from ferryman.api.vector_stores import CreateVectorStoreRequest
from ferryman.errors import ConflictError, InvalidRequestError, NotFoundError
from ferryman.ids import new_id
from ferryman.inference.router import ModelRouter
from ferryman.knowledge.rag import Searcher, chunk_metadata, rag_query
from ferryman.knowledge.results import RankingOptions, SearchMode, SearchQuery
from ferryman.safe_fetch import FetchPolicy
from ferryman.storage.base import IdempotencyKeyHeldError
from ferryman.storage.knowledge import VectorStoreRecord

from .documents import document_texts
from .idempotency import Claim
from .vector_stores import VectorStoreService

DEFAULT_PROVIDER = "ferryman"
"""The ``provider_id`` a vector DB shows when its registration named none."""
_LIST_PAGE = 100
_MODES: tuple[SearchMode, ...] = ("vector", "keyword", "hybrid")


def vector_db(record: VectorStoreRecord) -> VectorDB:
    """The Llama Stack view of a vector store."""
    return VectorDB(
        identifier=record.vector_store_id,
        provider_id=record.provider_id or DEFAULT_PROVIDER,
        provider_resource_id=record.provider_vector_db_id or record.vector_store_id,
        embedding_model=record.embedding_model,
        embedding_dimension=record.embedding_dimension,
    )


class VectorDbService:
    """Vector DBs, their chunks, and the RAG tool's insert and query.

    Args:
        models: Resolves embedding models.
        vector_stores: Chunks and embeds inserted text.
        search: Runs queries.
        fetch: What a RAG document's URL may reach.
    """

    def __init__(
        self,
        models: ModelRouter,
        vector_stores: VectorStoreService,
        search: Searcher,
        fetch: FetchPolicy | None = None,
    ) -> None:
        self._models = models
        self._vector_stores = vector_stores
        self._search = search
        self._fetch = fetch or FetchPolicy()

    async def register(self, request: RegisterVectorDbRequest, key: Claim | None = None) -> VectorDB:
        """Create a vector DB; registering the same id with the same model again answers the existing one.
        ``key`` (the request's idempotency key) is claimed by the write that stores a new one, answered with it.

        Raises:
            InvalidRequestError: the model is no embedding model, or its dimension is not the one given.
            ConflictError: the id is taken by a vector DB of another model (or by another caller).
        """
        body = CreateVectorStoreRequest(
            name=request.vector_db_id,
            embedding_model=request.embedding_model,
            embedding_dimension=request.embedding_dimension,
            provider_id=request.provider_id,
        )
        try:
            made, _ = await self._vector_stores.created(
                body, request.vector_db_id, request.provider_vector_db_id, key, vector_db
            )
        except IdempotencyKeyHeldError:
            raise  # an earlier call with the key answers
        except ConflictError:
            existing = await self._existing(request.vector_db_id)
            if (
                existing is None
                or existing.embedding_model != self._models.embedding_model(body.embedding_model).identifier
            ):
                raise
            return vector_db(existing)
        return vector_db(made)

    async def _existing(self, vector_db_id: str) -> VectorStoreRecord | None:
        try:
            return await self._vector_stores.record(vector_db_id)
        except NotFoundError:
            return None  # taken by a vector DB the caller may not read: the conflict stands

    async def get(self, vector_db_id: str) -> VectorDB:
        """One vector DB (NotFoundError if unknown or not the caller's to read)."""
        return vector_db(await self._vector_stores.record(vector_db_id))

    async def list(self) -> list[VectorDB]:
        """Every vector DB the caller may read, oldest first."""
        found: list[VectorDB] = []
        after: str | None = None
        while True:
            page = await self._vector_stores.page(after, _LIST_PAGE, "asc")
            found.extend(vector_db(record) for record in page.items)
            if not page.has_more or not page.items:
                return found
            after = page.items[-1].vector_store_id

    async def unregister(self, vector_db_id: str) -> None:
        """Delete a vector DB with its chunks."""
        await self._vector_stores.delete(vector_db_id)

    async def insert(self, request: InsertChunksRequest) -> None:
        """Index chunks, embedding those given without an ``embedding``; each names its ``metadata.document_id``.

        Raises:
            InvalidRequestError: a chunk has no text, or a ``document_id`` that is no id (too long, or holding
                a control character).
        """
        await self._vector_stores.record(request.vector_db_id, "update")  # before reading or fetching documents
        chunks: list[tuple[str, dict[str, Any], str, list[float] | None]] = []
        for index, chunk in enumerate(request.chunks):
            text = content_to_text(chunk.content)
            if not text.strip():
                raise InvalidRequestError(f"chunk {index} has no text", f"chunks[{index}].content")
            document_id = chunk.metadata.get("document_id")
            if not isinstance(document_id, str) or not document_id:
                document_id = new_id()
            elif len(document_id) > MAX_ID_CHARS or has_control_character(document_id):
                # Stored as the chunk's source, an id column (PostgreSQL's text cannot hold NUL).
                raise InvalidRequestError(
                    f"a document_id must be at most {MAX_ID_CHARS} characters long, without control characters",
                    f"chunks[{index}].metadata.document_id",
                )
            chunks.append((text, dict(chunk.metadata), document_id, chunk.embedding))
        if chunks:
            await self._vector_stores.insert_chunks(request.vector_db_id, chunks)

    async def query(self, request: QueryChunksRequest) -> QueryChunksResponse:
        """The best chunks for a query; ``params``: ``max_chunks``, ``score_threshold``, ``mode``."""
        params = request.params or {}
        outcome = await self._search.search(
            SearchQuery(
                vector_store_ids=[request.vector_db_id],
                query=content_to_text(request.query),
                max_num_results=_int_param(params, "max_chunks", 10),
                ranking=RankingOptions(score_threshold=_float_param(params, "score_threshold", 0.0)),
                mode=_mode_param(params),
            )
        )
        chunks = [WireChunk(content=r.text, metadata=chunk_metadata(r)) for r in outcome.results]
        return QueryChunksResponse(chunks=chunks, scores=[r.score for r in outcome.results])

    async def rag_insert(self, request: RagInsertRequest) -> None:
        """Read each document (fetching URLs within the fetch policy), chunk it, embed it and index it."""
        await self._vector_stores.record(request.vector_db_id, "update")  # before reading or fetching documents
        wanted = [Document(content=d.content, mime_type=d.mime_type or "text/plain") for d in request.documents]
        texts = await document_texts(wanted, self._fetch)
        documents = [
            (d.document_id, text, {**d.metadata, "document_id": d.document_id})
            for d, text in zip(request.documents, texts, strict=True)
        ]
        if documents:
            await self._vector_stores.insert_texts(request.vector_db_id, documents, request.chunk_size_in_tokens)

    async def rag_query(self, request: RagQueryRequest) -> RAGQueryResult:
        """Search the vector DBs for the content's text and lay the chunks out for a model."""
        config = request.query_config or RAGQueryConfig()
        query = config.query_generator_config.separator.join(_texts(request))
        return await rag_query(self._search, query, list(request.vector_db_ids), config)


def _texts(request: RagQueryRequest) -> list[str]:
    content = request.content
    parts = content if isinstance(content, list) else [content]
    texts = [content_to_text(part) for part in parts]
    return [text for text in texts if text]


def _int_param(params: dict[str, Any], name: str, default: int) -> int:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise InvalidRequestError(f"params.{name} must be an integer", f"params.{name}")
    return int(value)


def _float_param(params: dict[str, Any], name: str, default: float) -> float:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequestError(f"params.{name} must be a number", f"params.{name}")
    return float(value)


def _mode_param(params: dict[str, Any]) -> SearchMode:
    mode = params.get("mode") or "vector"
    for known in _MODES:
        if mode == known:
            return known
    raise InvalidRequestError("params.mode must be one of vector, keyword, hybrid", "params.mode")
