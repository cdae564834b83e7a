"""Search over vector stores: keyword, vector or hybrid, filtered by file attributes, scored in [0, 1].

One service answers OpenAI's ``/v1/vector_stores/{id}/search``, Llama Stack's
vector-io query and RAG tool, and the ``file_search`` tool. For each store it
checks the caller may read it, keeps the files whose attributes pass the filter,
embeds the query with the store's model, asks the backend for a candidate pool by
keyword and by vector, and ranks (see :mod:`ferryman.knowledge.fusion` for how
scores are made). Results of every store and every query part are merged by score.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ferryman.api.limits import MAX_ID_CHARS, MAX_SEARCH_QUERY_CHARS, has_control_character
from ferryman.errors import InvalidRequestError
from ferryman.inference.router import ModelRouter
from ferryman.storage.base import Store
from ferryman.storage.knowledge import ChunkHit, ChunkRecord, VectorStoreFileRecord, VectorStoreRecord

from .embedding import unit
from .filters import Predicate, parse_filter
from .fusion import cosine_score, rank_scores, reciprocal_rank_fusion
from .results import SearchMode, SearchOutcome, SearchQuery, SearchResult
from .rewrite import rewrite_query
from .views import expired, now

MAX_RESULTS = 50
MIN_POOL = 50
ACTIVITY_SECONDS = 60
"""A search records a store's activity (its expiry anchor) at most this often: not one write per search."""

_RANKERS: dict[str, SearchMode] = {
    "auto": "hybrid",
    "default-2024-11-15": "hybrid",
    "none": "hybrid",
    "hybrid": "hybrid",
    "vector": "vector",
    "keyword": "keyword",
}


def search_mode(query: SearchQuery) -> SearchMode:
    """The mode a query runs in: its explicit ``mode``, else its ranker's (an unknown ranker is a 400)."""
    if query.mode is not None:
        if query.mode not in ("hybrid", "vector", "keyword"):
            raise InvalidRequestError("search_mode must be one of hybrid, vector, keyword", "search_mode")
        return query.mode
    mode = _RANKERS.get(query.ranking.ranker)
    if mode is None:
        known = ", ".join(_RANKERS)
        raise InvalidRequestError(f"ranking_options.ranker must be one of {known}", "ranking_options.ranker")
    return mode


def _query_parts(query: str | list[str]) -> list[str]:
    parts = [query] if isinstance(query, str) else list(query)
    if not parts or any(not isinstance(p, str) or not p.strip() for p in parts):
        raise InvalidRequestError("query must be a non-empty string (or a list of them)", "query")
    return parts


def _validate(query: SearchQuery) -> None:
    # Checked here, not only in the request models: a tool's arguments (``/tool-runtime/invoke``, a model's
    # call) reach a search too, and a long query costs seconds of tokenizing, embedding and matching.
    parts = [query.query] if isinstance(query.query, str) else query.query
    longest = max((len(part) for part in parts if isinstance(part, str)), default=0)
    if longest > MAX_SEARCH_QUERY_CHARS:
        raise InvalidRequestError(
            f"a search query holds at most {MAX_SEARCH_QUERY_CHARS} characters (got {longest})", "query"
        )
    if not query.vector_store_ids:
        raise InvalidRequestError("at least one vector store must be searched", "vector_store_ids")
    if any(len(i) > MAX_ID_CHARS or has_control_character(i) for i in query.vector_store_ids):
        # Named in a tool's arguments too; an id a store cannot hold (NUL on PostgreSQL) is no store's.
        raise InvalidRequestError(
            f"a vector store id holds at most {MAX_ID_CHARS} characters, no control character", "vector_store_ids"
        )
    if not 1 <= query.max_num_results <= MAX_RESULTS:
        raise InvalidRequestError(f"max_num_results must be between 1 and {MAX_RESULTS}", "max_num_results")
    if not 0.0 <= query.ranking.score_threshold <= 1.0:
        raise InvalidRequestError(
            "ranking_options.score_threshold must be between 0 and 1", "ranking_options.score_threshold"
        )


@dataclass(frozen=True)
class _Scored:
    chunk: ChunkRecord
    score: float


FileNames = Callable[[list[str]], Awaitable[dict[str, str]]]
"""The names of those of these files the current caller may read (one missing, or not the caller's, is left out)."""


async def _unnamed(file_ids: list[str]) -> dict[str, str]:
    return {}


class StoreRecords(Protocol):
    """Vector stores' records, as the current caller may read them."""

    async def record(self, vector_store_id: str) -> VectorStoreRecord:
        """A store's record (NotFoundError if it is missing, or the caller may not read it)."""
        ...

    async def touch(self, vector_store_id: str, at: int) -> None:
        """Record a store's activity, whoever acted (server machinery)."""
        ...


class SearchService:
    """Searches vector stores as the current caller.

    Args:
        store: The backend, which holds the stores' chunks (the caller is checked on ``stores``, first).
        models: Embeds queries with each store's embedding model.
        stores: The stores' records; reading one checks the caller may.
        file_names: Names results' files as they are now (default: as their chunks recorded them when ingested).
    """

    def __init__(
        self, store: Store, models: ModelRouter, stores: StoreRecords, file_names: FileNames = _unnamed
    ) -> None:
        self._store = store
        self._models = models
        self._stores = stores
        self._file_names = file_names

    async def search(self, query: SearchQuery) -> SearchOutcome:
        """The best chunks of the query's stores, best first.

        Raises:
            InvalidRequestError: an empty query or one over ``MAX_SEARCH_QUERY_CHARS``, a store id that is
                no id, a bad filter, ranker or bound.
            NotFoundError: a store is unknown, or the caller may not read it.
        """
        _validate(query)
        mode = search_mode(query)
        parts = _query_parts(query.query)
        if query.rewrite_query:
            parts = [rewrite_query(part) for part in parts]
        allowed = parse_filter(query.filters) if query.filters is not None else None
        stores = [await self._stores.record(store_id) for store_id in dict.fromkeys(query.vector_store_ids)]
        results: list[SearchResult] = []
        for record in stores:
            results.extend(await self._search_store(record, parts, mode, allowed, query.max_num_results))
            await self._touch(record)
        threshold = query.ranking.score_threshold
        results = [r for r in results if r.score >= threshold]
        results.sort(key=lambda r: r.score, reverse=True)
        return SearchOutcome(" ".join(parts), results[: query.max_num_results])

    async def _search_store(
        self,
        record: VectorStoreRecord,
        parts: list[str],
        mode: SearchMode,
        allowed: Predicate | None,
        limit: int,
    ) -> list[SearchResult]:
        attachments: dict[str, VectorStoreFileRecord] | None = None
        file_ids: list[str] | None = None
        if allowed is not None:  # which files the filter keeps: every attachment's attributes are read
            attachments = {f.file_id: f for f in await self._store.all_vector_store_files(record.vector_store_id)}
            file_ids = [f.file_id for f in attachments.values() if allowed(f.attributes)]
            if not file_ids:
                return []
        vectors = await self._embed(record, parts) if mode != "keyword" else [None] * len(parts)
        pool = max(MIN_POOL, 4 * limit)
        best: dict[str, _Scored] = {}
        for part, vector in zip(parts, vectors, strict=True):
            for scored in await self._rank(record.vector_store_id, part, vector, mode, file_ids, pool):
                kept = best.get(scored.chunk.chunk_id)
                if kept is None or scored.score > kept.score:
                    best[scored.chunk.chunk_id] = scored
        ranked = sorted(best.values(), key=lambda s: s.score, reverse=True)[:limit]
        hit_files = list(dict.fromkeys(s.chunk.file_id for s in ranked))
        if attachments is None:  # only the results' files are read
            found = await self._store.vector_store_files(record.vector_store_id, hit_files)
            attachments = {f.file_id: f for f in found}
        names = await self._file_names([file_id for file_id in hit_files if file_id in attachments])
        return [_result(record, s, attachments.get(s.chunk.file_id), names) for s in ranked]

    async def _touch(self, record: VectorStoreRecord) -> None:
        """The store was searched: its expiry counts from now (unless recorded in the last minute, or expired)."""
        at = now()
        if at - record.last_active_at < ACTIVITY_SECONDS or expired(record, at):
            return
        # Activity keeps a store alive whoever searched it (a reader who may not edit it too): server machinery.
        await self._stores.touch(record.vector_store_id, at)

    async def _embed(self, record: VectorStoreRecord, parts: list[str]) -> list[list[float] | None]:
        embedded = await self._models.embed(record.embedding_model, parts)
        return [unit(vector) for vector in embedded]

    async def _rank(
        self,
        store_id: str,
        text: str,
        vector: list[float] | None,
        mode: SearchMode,
        file_ids: list[str] | None,
        pool: int,
    ) -> list[_Scored]:
        keyword: list[ChunkHit] = []
        semantic: list[ChunkHit] = []
        if mode != "vector":
            keyword = await self._store.keyword_search(store_id, text, file_ids, pool)
        if mode != "keyword" and vector is not None:
            semantic = await self._store.vector_search(store_id, vector, file_ids, pool)
        chunks = {hit.chunk.chunk_id: hit.chunk for hit in (*keyword, *semantic)}
        if mode == "vector":
            return [_Scored(hit.chunk, cosine_score(hit.score)) for hit in semantic]
        if mode == "keyword":
            scores = rank_scores([hit.chunk.chunk_id for hit in keyword])
        else:
            lists = [[hit.chunk.chunk_id for hit in keyword], [hit.chunk.chunk_id for hit in semantic]]
            scores = reciprocal_rank_fusion(lists)
        return [_Scored(chunks[chunk_id], score) for chunk_id, score in scores.items()]


def _result(
    record: VectorStoreRecord, scored: _Scored, attachment: VectorStoreFileRecord | None, names: dict[str, str]
) -> SearchResult:
    chunk = scored.chunk
    # A file detached (or deleted, or not the caller's to read) is named as its chunk recorded it: its chunks may
    # remain searchable.
    filename = names.get(chunk.file_id) or str(chunk.metadata.get("filename") or chunk.file_id)
    return SearchResult(
        vector_store_id=record.vector_store_id,
        file_id=chunk.file_id,
        filename=filename,
        chunk_id=chunk.chunk_id,
        text=chunk.text,
        score=scored.score,
        attributes=dict(attachment.attributes) if attachment is not None else {},
        metadata=dict(chunk.metadata),
    )
