"""The chunk index: chunks of vector stores' files, searched by keyword and by vector.

Keyword search runs on an index held in process
(:class:`~ferryman.storage.search.keyword_index.KeywordIndex`), and so does vector
search where the dialect has no index of its own (SQLite; PostgreSQL searches
with pgvector, ``sql/vectors.py``). Such an index is kept current from the
store's chunk feed (``sql/chunk_changes.py``): the next search after a write
applies only what it changed, and a replica sees another's writes at its next
search. The hits' rows are then read from the table, so a chunk deleted since
is left out.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ferryman.storage.knowledge import ChunkHit, ChunkRecord
from ferryman.storage.page import Page
from ferryman.storage.search.chunk_feed import ChunkChanges
from ferryman.storage.sql.chunk_changes import changes, changes_query, insert_chunks, moved_or_missing
from ferryman.storage.sql.dialects import Compiled, SqlDialect, p
from ferryman.storage.sql.domain_tables import CHUNK_COLUMNS, chunks
from ferryman.storage.sql.seam import Driver, Row, VectorIndex, Work

if TYPE_CHECKING:
    from ferryman.storage.search.chunk_search import InProcessSearch


C = chunks.c


def chunk_record(row: Row) -> ChunkRecord:
    """A chunk of a row of :data:`~ferryman.storage.sql.domain_tables.CHUNK_COLUMNS`."""
    return ChunkRecord(
        chunk_id=row[0],
        vector_store_id=row[1],
        file_id=row[2],
        position=row[3],
        text=row[4],
        embedding=bytes(row[5]),
        token_count=row[6],
        metadata=json.loads(row[7]),
    )


def _scored(found: list[Row]) -> list[ChunkHit]:
    """Hits of rows of :data:`~ferryman.storage.sql.domain_tables.CHUNK_COLUMNS` followed by a score."""
    return [ChunkHit(chunk_record(row), float(row[8])) for row in found]


def _file_page(d: SqlDialect) -> Compiled:
    """Up to ``:limit`` chunks of file ``:file_id`` in ``:vector_store_id``, by position after ``:after``."""
    return d.compiled(
        "chunks.file_page",
        lambda: (
            sa.select(*CHUNK_COLUMNS)
            .where(C.vector_store_id == p("vector_store_id"), C.file_id == p("file_id"), C.position > p("after"))
            .order_by(C.position, C.id)
            .limit(p("limit"))
        ),
    )


def _by_id(d: SqlDialect) -> Compiled:
    """The chunks of ``:vector_store_id`` whose ids are in list ``:ids``."""
    return d.compiled(
        "chunks.by_id",
        lambda: sa.select(*CHUNK_COLUMNS).where(C.vector_store_id == p("vector_store_id"), d.one_of(C.chunk_id, "ids")),
    )


class ChunkTables:
    """Chunks: written with their ingestion or directly, listed per file, searched, and fed to in-process indexes."""

    _db: Driver
    _search: InProcessSearch

    async def add_chunks(self, vector_store_id: str, chunks: list[ChunkRecord]) -> None:
        """Insert chunks directly (Llama Stack's vector-io), replacing same ids; NotFoundError if no such store."""

        def work() -> Work[None]:
            version = yield from moved_or_missing(vector_store_id)
            yield from insert_chunks(self._db.dialect, vector_store_id, chunks, version)

        await self._db.write(work())

    async def chunk_changes(
        self, vector_store_id: str, since: int | None, *, texts: bool, embeddings: bool
    ) -> ChunkChanges | None:
        """The changes to a store's chunks after version ``since``, in one statement (see :class:`.ChunkFeed`)."""

        def work() -> Work[ChunkChanges | None]:
            found = yield changes_query(self._db.dialect, texts, embeddings).rows(
                vector_store_id=vector_store_id, since=-1 if since is None else since
            )
            # Decoded inside the unit: on SQLite that is the reader's thread, not the event loop.
            return changes(found)

        return await self._db.read(work())

    async def list_chunks(self, vector_store_id: str, file_id: str, after: int | None, limit: int) -> Page[ChunkRecord]:
        """A file's chunks in order, after the given ``position``."""
        found = await self._db.read(
            _file_page(self._db.dialect).rows(
                vector_store_id=vector_store_id,
                file_id=file_id,
                after=-1 if after is None else after,
                limit=limit + 1,
            )
        )
        return Page([chunk_record(row) for row in found[:limit]], len(found) > limit)

    async def keyword_search(
        self, vector_store_id: str, query: str, file_ids: list[str] | None, limit: int
    ) -> list[ChunkHit]:
        """The best chunks for a keyword query by BM25, best first (none for no words)."""
        return await self._search.keyword(vector_store_id, query, file_ids, limit)

    async def vector_search(
        self, vector_store_id: str, embedding: list[float], file_ids: list[str] | None, limit: int
    ) -> list[ChunkHit]:
        """The chunks nearest a unit-length vector by cosine similarity, best first."""
        vectors = self._db.dialect.vectors
        if vectors is None:
            return await self._search.vector(vector_store_id, embedding, file_ids, limit)
        if limit <= 0 or file_ids == []:
            return []
        return await self._indexed_search(vectors, vector_store_id, embedding, file_ids, limit)

    async def _chunks_by_id(self, vector_store_id: str, chunk_ids: list[str]) -> list[ChunkRecord]:
        """Those of these chunks of the store that exist, in no particular order."""
        d = self._db.dialect
        found = await self._db.read(_by_id(d).rows(vector_store_id=vector_store_id, ids=d.array(chunk_ids)))
        return [chunk_record(row) for row in found]

    async def _indexed_search(
        self, index: VectorIndex, vector_store_id: str, embedding: list[float], file_ids: list[str] | None, limit: int
    ) -> list[ChunkHit]:
        import numpy as np  # by the first search, not with the store (numpy's 12 MiB)

        found = await self._db.read(
            index.nearest(
                file_ids,
                len(embedding),
                {
                    "vector_store_id": vector_store_id,
                    "embedding": np.asarray(embedding, dtype="<f4").tobytes(),
                    "limit": limit,
                },
            )
        )
        return _scored(found)
