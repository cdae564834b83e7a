"""Keyword and vector search in process, over indexes kept current from a backend's chunk feed.

A backend without a search index of its own (SQLite, Redis; PostgreSQL for
keywords) hands :class:`InProcessSearch` two things: its feed
(:meth:`ChunkFeed.chunk_changes <.chunk_feed.ChunkFeed.chunk_changes>`) and a
read of chunks by id. A search brings the store's index up to date from the
feed (:class:`.synced_indexes.SyncedIndexes`), ranks in process, then reads the
hits' chunks, so a chunk deleted since the index's version is left out.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ferryman.storage.knowledge import ChunkHit, ChunkRecord
from ferryman.storage.search.synced_indexes import SyncedIndexes

if TYPE_CHECKING:
    from ferryman.storage.search.chunk_feed import ChunkChanges
    from ferryman.storage.search.keyword_index import KeywordIndex
    from ferryman.storage.search.vector_index import VectorIndex

_WORD = re.compile(r"\w+")

ChangesSince = Callable[..., Awaitable["ChunkChanges | None"]]
"""``(vector_store_id, since, *, texts, embeddings)``: a backend's chunk feed."""
ChunksById = Callable[[str, list[str]], Awaitable[list[ChunkRecord]]]
"""``(vector_store_id, chunk_ids)``: those chunks that still exist, in any order."""


def has_words(query: str) -> bool:
    """Whether a keyword query holds a word at all (one without finds nothing, and costs no read)."""
    return _WORD.search(query) is not None


def _keyword_index() -> KeywordIndex:
    # Imported by the first search, not with the store: a server that searches no store never loads numpy.
    from ferryman.storage.search.keyword_index import KeywordIndex

    return KeywordIndex()


def _vector_index() -> VectorIndex:
    from ferryman.storage.search.vector_index import VectorIndex

    return VectorIndex()


class InProcessSearch:
    """The in-process keyword and vector indexes of a backend's most recently searched stores.

    Args:
        changes_since: The backend's chunk feed.
        chunks_by_id: Reads chunks by id (a hit whose chunk is gone is dropped).
    """

    def __init__(self, changes_since: ChangesSince, chunks_by_id: ChunksById) -> None:
        self._changes_since = changes_since
        self._chunks_by_id = chunks_by_id
        self._keywords: SyncedIndexes[KeywordIndex] = SyncedIndexes(_keyword_index)
        self._vectors: SyncedIndexes[VectorIndex] = SyncedIndexes(_vector_index)

    def forget(self, vector_store_id: str) -> None:
        """Drop a deleted store's indexes."""
        self._keywords.forget(vector_store_id)
        self._vectors.forget(vector_store_id)

    async def keyword(self, vector_store_id: str, query: str, file_ids: list[str] | None, limit: int) -> list[ChunkHit]:
        """The best chunks for a keyword query by BM25, best first (none for a query without words)."""
        if not has_words(query) or limit <= 0 or file_ids == []:
            return []

        async def texts(since: int | None) -> ChunkChanges | None:
            return await self._changes_since(vector_store_id, since, texts=True, embeddings=False)

        async with self._keywords.current(vector_store_id, texts) as index:
            best = [] if index is None else index.best(query, file_ids, limit)
        return await self._hits(vector_store_id, best)

    async def vector(
        self, vector_store_id: str, embedding: list[float], file_ids: list[str] | None, limit: int
    ) -> list[ChunkHit]:
        """The chunks nearest a query vector by cosine similarity, best first."""
        if limit <= 0 or file_ids == []:
            return []

        async def embeddings(since: int | None) -> ChunkChanges | None:
            return await self._changes_since(vector_store_id, since, texts=False, embeddings=True)

        async with self._vectors.current(vector_store_id, embeddings) as index:
            # A matrix product over up to 250,000 rows (the index's ann_threshold): off the event loop.
            nearest = [] if index is None else await asyncio.to_thread(index.nearest, embedding, file_ids, limit)
        return await self._hits(vector_store_id, nearest)

    async def graph_built(self, vector_store_id: str, patience: float) -> bool:
        """Wait until no HNSW graph of the store's vectors is being built in the background (True), or ``patience``
        seconds (False). For measurements: searches do not wait (they are exact meanwhile)."""
        index = self._vectors.held(vector_store_id)
        return True if index is None else await asyncio.to_thread(index.wait_for_graph, patience)

    async def _hits(self, vector_store_id: str, scored: list[tuple[str, float]]) -> list[ChunkHit]:
        """The chunks of ``(chunk_id, score)`` pairs, in their order; a chunk deleted since is left out."""
        if not scored:
            return []
        found = await self._chunks_by_id(vector_store_id, [chunk_id for chunk_id, _ in scored])
        by_id = {chunk.chunk_id: chunk for chunk in found}
        return [ChunkHit(by_id[chunk_id], score) for chunk_id, score in scored if chunk_id in by_id]
