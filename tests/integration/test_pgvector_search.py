"""PostgreSQL's chunks in pgvector: the column's type, exact bytes back, and stores of any dimension side by side."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import numpy as np
import pytest
from storage_backends import POSTGRES_URL, postgres_store
from storage_backends import vector_store_record as a_store

from ferryman.storage.knowledge import ChunkRecord

pytestmark = pytest.mark.anyio


def vec(*values: float) -> bytes:
    array = np.asarray(values, dtype=np.float32)
    return (array / np.linalg.norm(array)).astype("<f4").tobytes()


def chunk(vector_store_id: str, chunk_id: str, embedding: bytes) -> ChunkRecord:
    return ChunkRecord(
        chunk_id=chunk_id,
        vector_store_id=vector_store_id,
        file_id="file_a",
        position=0,
        text=chunk_id,
        embedding=embedding,
        token_count=1,
        metadata={},
    )


async def test_stores_of_two_dimensions_search_their_own_vectors_in_sql(tmp_path: Path) -> None:
    async with postgres_store(tmp_path) as store:
        await store.create_vector_store(a_store("vs_3", 3), [])
        await store.create_vector_store(a_store("vs_2", 2), [])
        three = [chunk("vs_3", "x", vec(1, 0, 0)), chunk("vs_3", "xy", vec(1, 1, 0.1))]
        await store.add_chunks("vs_3", three)
        await store.add_chunks("vs_2", [chunk("vs_2", "y", vec(0, 1))])

        query = np.frombuffer(vec(1, 1, 0), "<f4")
        hits = await store.vector_search("vs_3", [float(x) for x in query], None, 5)
        assert [h.chunk for h in hits] == [three[1], three[0]]  # the very bytes written
        cosines = [float(np.frombuffer(c.embedding, "<f4") @ query) for c in (three[1], three[0])]
        assert [h.score for h in hits] == pytest.approx(cosines, abs=1e-6)
        assert [h.chunk.chunk_id for h in await store.vector_search("vs_2", [0.0, 1.0], None, 5)] == ["y"]
        # A query of another dimension than the store's chunks finds nothing rather than failing.
        assert await store.vector_search("vs_2", [1.0, 0.0, 0.0], None, 5) == []

        schema = store._db._schema  # type: ignore[attr-defined]
        admin = await asyncpg.connect(POSTGRES_URL)
        try:
            column = await admin.fetchval(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = format('%I.chunks', $1::text)::regclass AND attname = 'embedding'",
                schema,
            )
        finally:
            await admin.close()
        assert column.endswith("vector")  # untyped: no dimension
