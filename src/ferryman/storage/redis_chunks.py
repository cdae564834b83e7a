"""The chunk index in Redis: chunks per vector store, searched in process, and ingestion's outcome.

A store's chunks are three hashes by chunk id (JSON, embedding bytes, file id)
and a sorted set per file by position. Search has no Redis module to lean on:
the store's embeddings (:class:`.vector_cache.VectorCache`) or its texts
(:class:`.keyword_cache.KeywordCache`) are loaded once per version of the
store and searched in process. The client decodes replies as text, so the
commands that read embeddings ask for raw bytes (``NEVER_DECODE``), in plain
pipelines.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, cast

from redis.client import NEVER_DECODE

from .keyword_cache import KeywordCache, KeywordRows
from .knowledge import ChunkHit, ChunkRecord, VectorStoreFileRecord
from .page import Page
from .redis_keys import CHUNK_FILES, CHUNK_VECTORS, CHUNKS, FILE_CHUNKS, VECTOR_STORE
from .redis_knowledge import RedisKnowledge
from .redis_lua_chunks import ADD_CHUNKS, FINISH_INGESTION, AddChunks, FinishIngestion
from .vector_cache import VectorCache, VectorRows

_RAW = {NEVER_DECODE: True}


def _chunk_lists(chunks: list[ChunkRecord]) -> dict[str, Any]:
    """The :class:`~.redis_lua_chunks.Chunks` lists of these chunks."""
    return {
        "chunk_ids": [c.chunk_id for c in chunks],
        "file_ids": [c.file_id for c in chunks],
        "positions": [str(c.position) for c in chunks],
        "bodies": [_body(c) for c in chunks],
        "vectors": [c.embedding for c in chunks],
    }


def _body(chunk: ChunkRecord) -> str:
    return json.dumps(
        {
            "file_id": chunk.file_id,
            "position": chunk.position,
            "text": chunk.text,
            "token_count": chunk.token_count,
            "metadata": chunk.metadata,
        }
    )


def _chunk_of(vector_store_id: str, chunk_id: str, body: str, embedding: bytes) -> ChunkRecord:
    fields = json.loads(body)
    return ChunkRecord(chunk_id=chunk_id, vector_store_id=vector_store_id, embedding=embedding, **fields)


class RedisChunks(RedisKnowledge):
    """Chunks, searches over them and ingestion's outcome, over the backend's scripts and pipelines."""

    _vectors: VectorCache
    _keywords: KeywordCache

    def _forget_index(self, vector_store_id: str) -> None:
        self._vectors.forget(vector_store_id)
        self._keywords.forget(vector_store_id)

    async def add_chunks(self, vector_store_id: str, chunks: list[ChunkRecord]) -> None:
        """Insert chunks directly, replacing same ids (NotFoundError if the store is gone)."""
        await self._run(ADD_CHUNKS, AddChunks(**_chunk_lists(chunks), vector_store_id=vector_store_id))

    async def finish_ingestion(
        self, job: VectorStoreFileRecord, chunks: list[ChunkRecord], claimed_until: datetime
    ) -> bool:
        """Store a job's outcome and its chunks together, only while the claim leasing it ``claimed_until`` holds.

        Returns whether it wrote.
        """
        error = job.last_error
        finish = FinishIngestion(
            **_chunk_lists(chunks),
            vector_store_id=job.vector_store_id,
            file_id=job.file_id,
            lease=claimed_until.timestamp(),
            status=job.status,
            usage_bytes=job.usage_bytes,
            last_error=json.dumps({"code": error.code, "message": error.message}) if error else None,
        )
        return await self._run(FINISH_INGESTION, finish)

    async def list_chunks(self, vector_store_id: str, file_id: str, after: int | None, limit: int) -> Page[ChunkRecord]:
        """A file's chunks in order, after the given ``position``."""
        low = "-inf" if after is None else f"({after}"
        order = self._keys.pair(FILE_CHUNKS, vector_store_id, file_id)
        ids = cast(list[str], await self._db.zrangebyscore(order, low, "+inf", start=0, num=limit + 1))
        found = await self._chunks(vector_store_id, ids)
        return Page(found[:limit], len(found) > limit)

    async def keyword_search(
        self, vector_store_id: str, query: str, file_ids: list[str] | None, limit: int
    ) -> list[ChunkHit]:
        """The best chunks for a keyword query by BM25, best first (an empty query finds nothing)."""
        version = await self._version(vector_store_id)
        if version is None:
            return []

        async def load() -> KeywordRows:
            return await self._keyword_rows(vector_store_id)

        best = await self._keywords.best(vector_store_id, version, load, query, file_ids, limit)
        return await self._hits(vector_store_id, best)

    async def vector_search(
        self, vector_store_id: str, embedding: list[float], file_ids: list[str] | None, limit: int
    ) -> list[ChunkHit]:
        """The chunks nearest a unit-length query vector by cosine similarity, best first."""
        version = await self._version(vector_store_id)
        if version is None:
            return []

        async def load() -> VectorRows:
            return await self._vector_rows(vector_store_id)

        nearest = await self._vectors.nearest(vector_store_id, version, load, embedding, file_ids, limit)
        return await self._hits(vector_store_id, nearest)

    async def _version(self, vector_store_id: str) -> int | None:
        version = await self._db.hget(self._keys.of(VECTOR_STORE, vector_store_id), "version")
        return None if version is None else int(version)

    async def _hits(self, vector_store_id: str, scored: list[tuple[str, float]]) -> list[ChunkHit]:
        chunks = {c.chunk_id: c for c in await self._chunks(vector_store_id, [chunk_id for chunk_id, _ in scored])}
        return [ChunkHit(chunks[chunk_id], score) for chunk_id, score in scored if chunk_id in chunks]

    async def _chunks(self, vector_store_id: str, ids: list[str]) -> list[ChunkRecord]:
        """These chunks in this order; one deleted meanwhile is left out."""
        if not ids:
            return []
        async with self._db.pipeline(transaction=False) as pipe:
            pipe.hmget(self._keys.of(CHUNKS, vector_store_id), ids)
            pipe.execute_command("HMGET", self._keys.of(CHUNK_VECTORS, vector_store_id), *ids, **_RAW)
            bodies, vectors = await pipe.execute()
        return [
            _chunk_of(vector_store_id, chunk_id, body, vector)
            for chunk_id, body, vector in zip(ids, bodies, vectors, strict=True)
            if body is not None and vector is not None
        ]

    async def _hashes(self, vector_store_id: str, reads: list[tuple[str, bool]]) -> list[Any]:
        """``HGETALL`` of each ``(kind, raw)`` hash of a store (raw: values as bytes).

        Not one snapshot (a transaction's reply cannot leave some values undecoded): what is read is at least
        as new as the version the caller read before, so a write meanwhile only moves the version, and the
        next search loads again. Chunks are read again by id before they are returned.
        """
        async with self._db.pipeline(transaction=False) as pipe:
            for kind, raw in reads:
                pipe.execute_command("HGETALL", self._keys.of(kind, vector_store_id), **(_RAW if raw else {}))
            found: list[Any] = await pipe.execute()
        return found

    async def _vector_rows(self, vector_store_id: str) -> VectorRows:
        vectors, files = await self._hashes(vector_store_id, [(CHUNK_VECTORS, True), (CHUNK_FILES, False)])
        rows = [(raw.decode(), vector) for raw, vector in vectors.items() if raw.decode() in files]
        return VectorRows([i for i, _ in rows], [files[i] for i, _ in rows], [vector for _, vector in rows])

    async def _keyword_rows(self, vector_store_id: str) -> KeywordRows:
        [bodies] = await self._hashes(vector_store_id, [(CHUNKS, False)])
        chunks = {chunk_id: json.loads(body) for chunk_id, body in bodies.items()}
        return KeywordRows(list(chunks), [c["file_id"] for c in chunks.values()], [c["text"] for c in chunks.values()])
