"""The chunk index in Redis: chunks per vector store, searched in process, and ingestion's outcome.

A store's chunks are three hashes by chunk id (JSON, embedding bytes, file id),
a sorted set per file by position, and the chunk feed's records: the version
that wrote each chunk and the files whose chunks a write dropped
(:mod:`.store_keys`). Search has no Redis module to lean on: each replica
keeps in-process indexes of the stores it searched (:class:`ferryman.storage.search.keyword_index.KeywordIndex`,
:class:`ferryman.storage.search.vector_index.VectorIndex`), brought up to date before each search
from what changed since the version they hold (:meth:`RedisChunks.chunk_changes`),
never rebuilt for a write. The client decodes replies as text, so what reads
embeddings asks for raw bytes (``NEVER_DECODE``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, cast

import orjson
from redis.client import NEVER_DECODE

from ferryman.storage.knowledge import ChunkHit, ChunkRecord, VectorStoreFileRecord
from ferryman.storage.page import Page
from ferryman.storage.redis.knowledge import RedisKnowledge
from ferryman.storage.redis.lua_chunks import (
    ADD_CHUNKS,
    CHUNK_CHANGES,
    FINISH_INGESTION,
    AddChunks,
    ChangesSince,
    FinishIngestion,
)
from ferryman.storage.redis.store_keys import CHUNK_FILES, CHUNK_VECTORS, CHUNKS, FILE_CHUNKS
from ferryman.storage.search.chunk_feed import ChunkChanges, ChunkEntry, ChunkRemoval
from ferryman.storage.search.chunk_search import InProcessSearch

_RAW = {NEVER_DECODE: True}


def _chunk_lists(chunks: list[ChunkRecord]) -> dict[str, Any]:
    """The :class:`~.lua_chunks.Chunks` lists of these chunks."""
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


_PAGE = 2000
"""Chunks whose values one pipeline reads, when an answer is too large for its script to read them."""


def _changes(found: list[Any]) -> ChunkChanges:
    """The changes :data:`~.lua_chunks.CHUNK_CHANGES` answered, its values (bytes) read in."""
    version, complete, ids, stamps, files, bodies, vectors, removed, _ = found
    texts = [None if body is None else orjson.loads(body)["text"] for body in bodies] if bodies else [""] * len(ids)
    embeddings = vectors or [b""] * len(ids)
    # A chunk whose values are gone was removed after the answer's version: the next answer has its removal.
    added = [
        ChunkEntry(chunk_id.decode(), file_id.decode(), int(stamp), text, embedding)
        for chunk_id, stamp, file_id, text, embedding in zip(ids, stamps, files, texts, embeddings, strict=True)
        if file_id is not None and text is not None and embedding is not None
    ]
    removals = [_removal(removed[i], int(removed[i + 1])) for i in range(0, len(removed), 2)]
    return ChunkChanges(int(version), complete == 1, added, removals)


def _removal(member: bytes, version: int) -> ChunkRemoval:
    """A removal of a file's chunks (member: the file id) or of one moved chunk (``<file id>\\0<chunk id>``)."""
    file_id, _, chunk_id = member.decode().partition("\0")
    return ChunkRemoval(version, file_id, chunk_id or None)


class RedisChunks(RedisKnowledge):
    """Chunks, searches over them and ingestion's outcome, over the backend's scripts and pipelines."""

    _search: InProcessSearch

    def _forget_index(self, vector_store_id: str) -> None:
        self._search.forget(vector_store_id)

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
        return await self._search.keyword(vector_store_id, query, file_ids, limit)

    async def vector_search(
        self, vector_store_id: str, embedding: list[float], file_ids: list[str] | None, limit: int
    ) -> list[ChunkHit]:
        """The chunks nearest a unit-length query vector by cosine similarity, best first."""
        return await self._search.vector(vector_store_id, embedding, file_ids, limit)

    async def chunk_changes(
        self, vector_store_id: str, since: int | None, *, texts: bool, embeddings: bool
    ) -> ChunkChanges | None:
        """The changes to a store's chunks after version ``since`` (None: all of them), in one script.

        See :class:`~ferryman.storage.search.chunk_feed.ChunkFeed`; None when there is no such store.
        """
        if self._scripts is None:
            raise RuntimeError("the store is not open")
        args = ChangesSince(vector_store_id, -1 if since is None else since, texts, embeddings)
        found = await self._scripts.run_raw(CHUNK_CHANGES, args)
        if not found:
            return None
        if found[8] == 1:
            found[4:7] = await self._values(vector_store_id, found[2], texts, embeddings)
        return _changes(found)

    async def _values(self, vector_store_id: str, ids: list[bytes], texts: bool, embeddings: bool) -> list[list[Any]]:
        """The file ids, bodies (when ``texts``) and embeddings (when ``embeddings``) of these chunks, read in pages.

        Read after the script's answer, so a value may be newer than the version it is stamped with: the chunk was
        replaced or removed since, and the next answer carries that change, which an index applies over it.
        """
        kinds = [CHUNK_FILES, *([CHUNKS] if texts else []), *([CHUNK_VECTORS] if embeddings else [])]
        columns: list[list[Any]] = [[] for _ in kinds]
        for start in range(0, len(ids), _PAGE):
            page = ids[start : start + _PAGE]
            async with self._db.pipeline(transaction=False) as pipe:
                for kind in kinds:
                    pipe.execute_command("HMGET", self._keys.of(kind, vector_store_id), *page, **_RAW)
                for column, values in zip(columns, await pipe.execute(), strict=True):
                    column.extend(values)
        files = columns[0]
        bodies = columns[1] if texts else []
        vectors = columns[-1] if embeddings else []
        return [files, bodies, vectors]

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
