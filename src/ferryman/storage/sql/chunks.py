"""The chunk index: chunks of vector stores' files, searched by keyword (in SQL) and by vector.

Vector search runs in the database where its dialect has an index
(PostgreSQL's pgvector, ``sql/vectors.py``), else in process: every write of a
store's chunks bumps the store's ``version`` in the same transaction, and
search loads a store's embeddings into the
:class:`~ferryman.storage.vector_cache.VectorCache` again only when that
version moved, so a replica sees another's writes at its next search.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ferryman.errors import NotFoundError

from ..knowledge import ChunkHit, ChunkRecord
from ..page import Page
from ..vector_cache import VectorCache, VectorRows
from .keywords import CHUNK_COLUMNS, words
from .seam import Dialect, Driver, ForeignKeyViolation, Row, VectorIndex, Work, count, each, first, rows


def chunk_record(row: Row) -> ChunkRecord:
    """A chunk of a row of :data:`~ferryman.storage.sql.keywords.CHUNK_COLUMNS`."""
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


def bump_version(d: Dialect, vector_store_ids: str) -> str:
    """A statement moving the version of the stores whose id is in ``:{vector_store_ids}`` (a dialect array)."""
    condition = d.any_of("vector_store_id", vector_store_ids)
    return f"UPDATE vector_stores SET version = version + 1 WHERE {condition}"  # noqa: S608


def bump(vector_store_id: str) -> Work[None]:
    """Move one store's version (its chunks changed)."""
    yield count(
        "UPDATE vector_stores SET version = version + 1 WHERE vector_store_id = :vector_store_id",
        vector_store_id=vector_store_id,
    )


def drop_file_chunks(vector_store_id: str, file_id: str) -> Work[None]:
    """Delete a file's chunks in one store and move the store's version."""
    yield count(
        "DELETE FROM chunks WHERE vector_store_id = :vector_store_id AND file_id = :file_id",
        vector_store_id=vector_store_id,
        file_id=file_id,
    )
    yield from bump(vector_store_id)


def insert_chunks(d: Dialect, vector_store_id: str, chunks: Sequence[ChunkRecord]) -> Work[None]:
    """Insert chunks into a store, replacing those of the same ids, and move the store's version.

    Raises:
        NotFoundError: the store does not exist.
    """
    yield count(
        f"DELETE FROM chunks WHERE vector_store_id = :vector_store_id AND {d.any_of('chunk_id', 'ids')}",  # noqa: S608
        vector_store_id=vector_store_id,
        ids=d.array([chunk.chunk_id for chunk in chunks]),
    )
    try:
        yield each(
            "INSERT INTO chunks (vector_store_id, chunk_id, file_id, position, text, token_count, metadata, "
            "embedding) VALUES (:vector_store_id, :chunk_id, :file_id, :position, :text, :token_count, "
            ":metadata, :embedding)",
            [
                {
                    "vector_store_id": vector_store_id,
                    "chunk_id": chunk.chunk_id,
                    "file_id": chunk.file_id,
                    "position": chunk.position,
                    "text": chunk.text,
                    "token_count": chunk.token_count,
                    "metadata": json.dumps(chunk.metadata),
                    "embedding": chunk.embedding,
                }
                for chunk in chunks
            ],
        )
    except ForeignKeyViolation as exc:
        raise NotFoundError(f"vector store '{vector_store_id}' not found") from exc
    yield from bump(vector_store_id)


def _file_scope(d: Dialect, file_ids: list[str] | None) -> tuple[str, dict[str, Any]]:
    """The condition (on ``chunks c``) and parameters that keep only these files' chunks (None: all)."""
    if file_ids is None:
        return "", {}
    return f" AND {d.any_of('c.file_id', 'file_ids')}", {"file_ids": d.array(file_ids)}


def _scored(found: list[Row]) -> list[ChunkHit]:
    """Hits of rows of :data:`~ferryman.storage.sql.keywords.CHUNK_COLUMNS` followed by a score."""
    return [ChunkHit(chunk_record(row), float(row[8])) for row in found]


class ChunkTables:
    """Chunks: written with their ingestion or directly, listed per file, searched."""

    _db: Driver
    _vectors: VectorCache

    async def add_chunks(self, vector_store_id: str, chunks: list[ChunkRecord]) -> None:
        """Insert chunks directly (Llama Stack's vector-io), replacing same ids; NotFoundError if no such store."""

        def work() -> Work[None]:
            known = yield first(
                "SELECT 1 FROM vector_stores WHERE vector_store_id = :vector_store_id", vector_store_id=vector_store_id
            )
            if known is None:
                raise NotFoundError(f"vector store '{vector_store_id}' not found")
            yield from insert_chunks(self._db.dialect, vector_store_id, chunks)

        await self._db.write(work())

    async def list_chunks(self, vector_store_id: str, file_id: str, after: int | None, limit: int) -> Page[ChunkRecord]:
        """A file's chunks in order, after the given ``position``."""
        found = await self._db.read(
            rows(
                f"SELECT {CHUNK_COLUMNS} FROM chunks c WHERE c.vector_store_id = :vector_store_id "  # noqa: S608
                "AND c.file_id = :file_id AND c.position > :after ORDER BY c.position, c.id LIMIT :limit",
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
        """The best chunks for a keyword query by the database's full-text rank, best first (none for no words)."""
        d = self._db.dialect
        terms = words(query)
        if not terms or limit <= 0 or file_ids == []:
            return []
        condition, params = _file_scope(d, file_ids)
        found = await self._db.read(
            rows(
                d.keywords.search(condition),
                query=d.keywords.match(terms),
                vector_store_id=vector_store_id,
                limit=limit,
                **params,
            )
        )
        return _scored(found)

    async def vector_search(
        self, vector_store_id: str, embedding: list[float], file_ids: list[str] | None, limit: int
    ) -> list[ChunkHit]:
        """The chunks nearest a unit-length vector by cosine similarity, best first (exact)."""
        d = self._db.dialect
        if limit <= 0 or file_ids == []:
            return []
        if d.vectors is not None:
            return await self._indexed_search(d.vectors, vector_store_id, embedding, file_ids, limit)
        version = await self._db.read(
            first(
                "SELECT version FROM vector_stores WHERE vector_store_id = :vector_store_id",
                vector_store_id=vector_store_id,
            )
        )
        if version is None:
            return []

        async def load() -> VectorRows:
            found = await self._db.read(
                rows(
                    "SELECT chunk_id, file_id, embedding FROM chunks WHERE vector_store_id = :vector_store_id "
                    "ORDER BY id",
                    vector_store_id=vector_store_id,
                )
            )
            return VectorRows([r[0] for r in found], [r[1] for r in found], [bytes(r[2]) for r in found])

        nearest = await self._vectors.nearest(vector_store_id, int(version[0]), load, embedding, file_ids, limit)
        if not nearest:
            return []
        found = await self._db.read(
            rows(
                f"SELECT {CHUNK_COLUMNS} FROM chunks c WHERE c.vector_store_id = :vector_store_id "  # noqa: S608
                f"AND {d.any_of('c.chunk_id', 'ids')}",
                vector_store_id=vector_store_id,
                ids=d.array([chunk_id for chunk_id, _ in nearest]),
            )
        )
        by_id = {row[0]: chunk_record(row) for row in found}
        # A chunk deleted since the matrix was loaded is left out.
        return [ChunkHit(by_id[chunk_id], score) for chunk_id, score in nearest if chunk_id in by_id]

    async def _indexed_search(
        self, index: VectorIndex, vector_store_id: str, embedding: list[float], file_ids: list[str] | None, limit: int
    ) -> list[ChunkHit]:
        import numpy as np  # by the first search, not with the store (numpy's 12 MiB)

        d = self._db.dialect
        condition, params = _file_scope(d, file_ids)
        found = await self._db.read(
            rows(
                index.nearest(condition),
                vector_store_id=vector_store_id,
                embedding=np.asarray(embedding, dtype="<f4").tobytes(),
                dimension=len(embedding),
                limit=limit,
                **params,
            )
        )
        return _scored(found)
