"""PostgreSQL's approximate vector search: an HNSW index per dimension, used for large stores, exact for small ones."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import asyncpg
import numpy as np
import pytest
from alembic import command
from storage_backends import POSTGRES_URL, postgres_store
from storage_backends import vector_store_record as a_store

from ferryman.storage.knowledge import ChunkRecord
from ferryman.storage.sql.dialects import Compiled
from ferryman.storage.sql.migrate import alembic_config, postgres_engine, upgrade_postgres
from ferryman.storage.sql.pgvector import EF_SEARCH
from ferryman.storage.sql.postgres import PostgresStore
from ferryman.storage.sql.seam import first
from ferryman.storage.sql.vectors import PgvectorIndex, cast_type

pytestmark = pytest.mark.anyio

BEFORE = "0016_history_epoch"
DIMENSION = 32
BIG = 2_000  # chunks in the big store: over the test's threshold of 500
SMALL = 60


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """One loop for the module: the searched stores are filled once (HNSW inserts are slow)."""
    return "asyncio"


class RecordingIndex(PgvectorIndex):
    """The store's index, noting the dimension of each search that went through HNSW."""

    def __init__(self, schema: str, approximate_from: int) -> None:
        super().__init__(schema, approximate_from)
        self.approximated: list[int] = []

    def approximate(self, files: bool, dimension: int, vector_store_id: str) -> Compiled:
        self.approximated.append(dimension)
        return super().approximate(files, dimension, vector_store_id)


class Schema:
    """A schema of its own (runtime-made indexes must not leak between tests), dropped afterwards."""

    def __init__(self) -> None:
        self.name = f"hnsw_{uuid.uuid4().hex[:12]}"
        self.admin: asyncpg.Connection

    async def indexes(self) -> dict[str, str]:
        """The HNSW indexes on chunks, by name, with their definitions (pgvector's schema left out)."""
        found = await self.admin.fetch(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'chunks' "
            "AND indexname LIKE 'chunks_embedding_%'",
            self.name,
        )
        return {row[0]: row[1].replace("public.", "") for row in found}


async def made_schema() -> Schema:
    made = Schema()
    made.admin = await asyncpg.connect(POSTGRES_URL)
    await made.admin.execute(f'CREATE SCHEMA "{made.name}"')
    return made


async def drop(made: Schema) -> None:
    await made.admin.execute(f'DROP SCHEMA "{made.name}" CASCADE')
    await made.admin.close()


@pytest.fixture(scope="module")
async def reachable(tmp_path_factory: pytest.TempPathFactory) -> None:
    async with postgres_store(tmp_path_factory.mktemp("probe")):  # skips (or, under CI, fails) when unreachable
        pass


@pytest.fixture
async def schema(reachable: None) -> AsyncIterator[Schema]:
    made = await made_schema()
    try:
        yield made
    finally:
        await drop(made)


@pytest.fixture
async def store(schema: Schema) -> AsyncIterator[PostgresStore]:
    opened = PostgresStore(POSTGRES_URL, schema=schema.name)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


def clustered(rng: np.random.Generator, centroids: np.ndarray, n: int) -> np.ndarray:
    """Unit vectors drawn around the centroids (as directions), as real embeddings cluster."""
    picked = centroids[rng.integers(0, len(centroids), n)]
    picked = picked / np.linalg.norm(picked, axis=1, keepdims=True)
    vectors = picked + rng.standard_normal(picked.shape).astype(np.float32) * (0.5 / np.sqrt(picked.shape[1]))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype("<f4")


async def fill(store: PostgresStore, vector_store_id: str, vectors: np.ndarray) -> None:
    """The vectors as chunks ``c<i>`` of files of 100 chunks each, written 500 at a time."""
    for start in range(0, len(vectors), 500):
        batch = [
            ChunkRecord(
                chunk_id=f"c{i}",
                vector_store_id=vector_store_id,
                file_id=f"file_{i // 100}",
                position=i % 100,
                text=f"chunk {i}",
                embedding=vectors[i].tobytes(),
                token_count=2,
                metadata={},
            )
            for i in range(start, min(start + 500, len(vectors)))
        ]
        await store.add_chunks(vector_store_id, batch)


def exact_ids(vectors: np.ndarray, query: np.ndarray, limit: int, among: list[int] | None = None) -> list[str]:
    """The ids of the nearest chunks by cosine, best first (the chunks of ``among`` only, if given)."""
    ids = np.arange(len(vectors)) if among is None else np.asarray(among)
    order = ids[np.argsort(-(vectors[ids] @ query), kind="stable")]
    return [f"c{i}" for i in order[:limit]]


async def found_ids(store: PostgresStore, vector_store_id: str, query: Any, limit: int, files: Any = None) -> list[str]:
    hits = await store.vector_search(vector_store_id, [float(x) for x in query], files, limit)
    return [hit.chunk.chunk_id for hit in hits]


# -- the migration ------------------------------------------------------------------------------------------------


async def migrate_down(schema: str, target: str) -> None:
    engine = postgres_engine(POSTGRES_URL, schema)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(lambda sync: command.downgrade(alembic_config(sync), target))
    finally:
        await engine.dispose()


def store_row(vector_store_id: str, dimension: int) -> str:
    strategy = json.dumps({"type": "auto"})
    return (
        "INSERT INTO vector_stores (vector_store_id, name, created_at, embedding_model, embedding_dimension, "
        f"metadata, chunking_strategy, last_active_at, version) VALUES ('{vector_store_id}', 'n', 1, 'm', "
        f"{dimension}, '{{}}', '{strategy}', 1, 1)"
    )


async def test_the_migration_indexes_each_stored_dimension_and_384_and_goes_down(schema: Schema) -> None:
    await upgrade_postgres(POSTGRES_URL, schema.name, BEFORE)
    await schema.admin.execute(f'SET search_path TO "{schema.name}"')
    for vector_store_id, dimension in [("vs_a", 768), ("vs_b", 768), ("vs_c", 3072), ("vs_d", 5000)]:
        await schema.admin.execute(store_row(vector_store_id, dimension))

    await upgrade_postgres(POSTGRES_URL, schema.name)
    made = await schema.indexes()
    assert set(made) == {"chunks_embedding_384", "chunks_embedding_768", "chunks_embedding_3072"}  # 5000: too many
    assert made["chunks_embedding_768"].endswith(
        "USING hnsw (((embedding)::vector(768)) vector_cosine_ops) WHERE (vector_dims(embedding) = 768)"
    )
    assert "halfvec(3072)) halfvec_cosine_ops" in made["chunks_embedding_3072"]

    await schema.admin.execute(PgvectorIndex("public").create_index(5))  # as a store of a new dimension does
    await migrate_down(schema.name, BEFORE)
    assert await schema.indexes() == {}
    assert await schema.admin.fetchval("SELECT count(*) FROM vector_stores") == 4


def test_hnsw_indexes_vectors_up_to_2000_dimensions_and_halfvecs_up_to_4000() -> None:
    assert [cast_type(d) for d in (0, 1, 2_000, 2_001, 4_000, 4_001)] == [
        None,
        "vector",
        "vector",
        "halfvec",
        "halfvec",
        None,
    ]


# -- indexes made at run time -------------------------------------------------------------------------------------


async def test_a_store_of_a_new_dimension_makes_its_index_once_even_when_replicas_race(
    schema: Schema, store: PostgresStore
) -> None:
    assert set(await schema.indexes()) == {"chunks_embedding_384"}
    twin = PostgresStore(POSTGRES_URL, schema=schema.name)  # another replica
    await twin.open()
    try:
        await asyncio.gather(
            store.create_vector_store(a_store("vs_1", 7), []),
            twin.create_vector_store(a_store("vs_2", 7), []),
            store.create_vector_store(a_store("vs_3", 7), []),
        )
    finally:
        await twin.close()
    await store.create_vector_store(a_store("vs_big", 2_500), [])
    await store.create_vector_store(a_store("vs_huge", 4_001), [])
    made = await schema.indexes()
    assert set(made) == {"chunks_embedding_384", "chunks_embedding_7", "chunks_embedding_2500"}
    assert "halfvec(2500)) halfvec_cosine_ops" in made["chunks_embedding_2500"]

    rng = np.random.default_rng(1)
    huge = clustered(rng, rng.standard_normal((2, 4_001)).astype(np.float32), 3)
    await fill(store, "vs_huge", huge)  # exact search only, past HNSW's dimensions
    assert await found_ids(store, "vs_huge", huge[2], 3) == exact_ids(huge, huge[2], 3)


# -- search -------------------------------------------------------------------------------------------------------


TINY_STORES = (
    "INSERT INTO vector_stores (vector_store_id, embedding_dimension, version, removals_from) "
    "SELECT 'vs_tiny_' || i, 32, 1, 1 FROM generate_series(1, 150) i; "
    "INSERT INTO chunks (vector_store_id, chunk_id, file_id, position, text, token_count, metadata, embedding) "
    "SELECT 'vs_tiny_' || (1 + i % 150), 'c' || i, 'file_0', i, 't', 1, '{}', "
    "(SELECT array_agg(random() - 0.5)::public.vector FROM generate_series(1, 32) WHERE i >= 0) "
    "FROM generate_series(0, 599) i"
)
"""150 stores of 4 chunks beside the big one: a plan for any store is a plan for a tiny one."""


class Filled(NamedTuple):
    store: PostgresStore
    index: RecordingIndex
    big: np.ndarray
    small: np.ndarray
    schema: str


@pytest.fixture(scope="module")
async def module_filled(reachable: None) -> AsyncIterator[Filled]:
    """A big store and a small one of the same dimension side by side, searched through HNSW from 500 chunks."""
    made = await made_schema()
    store = PostgresStore(POSTGRES_URL, schema=made.name)
    await store.open()
    try:
        index = RecordingIndex(store._db.dialect.vectors.schema, approximate_from=500)  # type: ignore[attr-defined]
        store._db.dialect.vectors = index  # type: ignore[attr-defined]
        rng = np.random.default_rng(23)
        centroids = rng.standard_normal((40, DIMENSION)).astype(np.float32)
        big, small = clustered(rng, centroids, BIG), clustered(rng, centroids, SMALL)
        await store.create_vector_store(a_store("vs_big", DIMENSION), [])
        await store.create_vector_store(a_store("vs_small", DIMENSION), [])
        await fill(store, "vs_big", big)
        await fill(store, "vs_small", small)
        await made.admin.execute(f'SET search_path TO "{made.name}"')
        await made.admin.execute(TINY_STORES)
        await made.admin.execute("ANALYZE chunks")
        yield Filled(store, index, big, small, made.name)
    finally:
        await store.close()
        await drop(made)


@pytest.fixture
def filled(module_filled: Filled) -> Filled:
    module_filled.index.approximated.clear()
    return module_filled


async def test_a_big_store_is_searched_through_hnsw_with_recall_of_exact_search(
    filled: Filled,
) -> None:
    store, index, big = filled.store, filled.index, filled.big
    queries = clustered(np.random.default_rng(5), big[::50], 40)
    recalls = []
    for query in queries:
        found = await found_ids(store, "vs_big", query, 10)
        assert len(found) == 10
        recalls.append(len(set(found) & set(exact_ids(big, query, 10))) / 10)
    assert index.approximated == [DIMENSION] * len(queries)
    assert np.mean(recalls) >= 0.95, np.mean(recalls)
    # Best first by the exact score, whatever order the index walked in.
    hits = await store.vector_search("vs_big", [float(x) for x in queries[0]], None, 10)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    assert hits[0].score == pytest.approx(float(big[int(hits[0].chunk.chunk_id[1:])] @ queries[0]), abs=1e-6)
    # The pool's connections scan iteratively: past ef_search, until enough rows pass the store's filter.
    settings = "SELECT current_setting('hnsw.iterative_scan'), current_setting('hnsw.ef_search')"
    assert tuple(await store._db.read(first(settings))) == ("relaxed_order", str(EF_SEARCH))  # type: ignore[attr-defined]


async def test_the_big_stores_query_plan_reads_the_hnsw_index_even_when_planned_once_for_any_values(
    filled: Filled,
) -> None:
    # asyncpg prepares statements, and PostgreSQL may plan one for any parameters (its generic plan): for a store
    # among many tiny ones, that plan would read the store's rows through the btree and sort them all.
    conn = await asyncpg.connect(POSTGRES_URL, server_settings={"search_path": filled.schema})
    try:
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        plan = await explained(conn, filled.index, filled.big[0])
    finally:
        await conn.close()
    assert "Index Scan using chunks_embedding_32 on chunks" in plan


async def explained(conn: asyncpg.Connection, index: PgvectorIndex, query: np.ndarray) -> str:
    """The plan of the big store's approximate search, over twenty of its files."""
    names: list[str] = []

    def numbered(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    sql = index.approximate(True, DIMENSION, "vs_big").sql
    sql = re.sub(r"(?<![:\w]):(\w+)", numbered, sql)
    await conn.execute(f"PREPARE nearest AS {sql}")
    values = {  # as text: pgvector's text form of the vector
        "vector_store_id": "'vs_big'",  # unless written into the statement
        "embedding": "'[" + ",".join(str(float(x)) for x in query) + "]'",
        "limit": "10",
        "file_ids": "'{" + ",".join(f"file_{i}" for i in range(20)) + "}'",
    }
    plan = await conn.fetch(f"EXPLAIN EXECUTE nearest({', '.join(values[name] for name in names)})")
    return "\n".join(row[0] for row in plan)


async def test_a_small_store_beside_a_big_one_is_searched_exactly_and_completely(
    filled: Filled,
) -> None:
    store, index, big, small = filled.store, filled.index, filled.big, filled.small
    for query in small[:5]:
        assert await found_ids(store, "vs_small", query, 10) == exact_ids(small, query, 10)
    assert await found_ids(store, "vs_small", small[0], 100) == exact_ids(small, small[0], SMALL)  # all of it
    # A few files of the big store are few chunks too.
    found = await found_ids(store, "vs_big", big[0], 10, ["file_3", "file_7"])
    assert found == exact_ids(big, big[0], 10, among=[*range(300, 400), *range(700, 800)])
    assert index.approximated == []


async def test_a_query_of_another_dimension_finds_nothing_on_either_path(
    filled: Filled,
) -> None:
    store = filled.store
    for dimension in (DIMENSION - 1, 384):
        assert await found_ids(store, "vs_big", np.ones(dimension) / np.sqrt(dimension), 10) == []
        assert await found_ids(store, "vs_small", np.ones(dimension) / np.sqrt(dimension), 10) == []


async def test_a_large_store_that_shrinks_is_still_searched_completely(filled: Filled) -> None:
    store, index = filled.store, filled.index
    vectors = clustered(np.random.default_rng(3), filled.big[::100], 600)
    await store.create_vector_store(a_store("vs_shrinking", DIMENSION), [])
    await fill(store, "vs_shrinking", vectors)
    assert len(await found_ids(store, "vs_shrinking", vectors[0], 10)) == 10
    assert index.approximated == [DIMENSION]  # and the store is remembered as large

    admin = await asyncpg.connect(POSTGRES_URL, server_settings={"search_path": filled.schema})
    try:  # another replica deletes all but 30 of its chunks
        await admin.execute("DELETE FROM chunks WHERE vector_store_id = 'vs_shrinking' AND position >= 5")
    finally:
        await admin.close()
    kept = [i for i in range(600) if i % 100 < 5]
    assert await found_ids(store, "vs_shrinking", vectors[0], 100) == exact_ids(vectors, vectors[0], 100, kept)
    assert await found_ids(store, "vs_shrinking", vectors[1], 10) == exact_ids(vectors, vectors[1], 10, kept)
    assert index.approximated == [DIMENSION] * 2  # the first found too few, and the next one counted


@pytest.mark.parametrize("vector_store_id", ["kb.:zz", "kb-:limit"])
async def test_a_store_id_holding_a_colon_is_searched_through_hnsw_as_a_parameter(
    filled: Filled, vector_store_id: str
) -> None:
    store, index = filled.store, filled.index
    vectors = clustered(np.random.default_rng(5), filled.big[::100], 600)
    await store.create_vector_store(a_store(vector_store_id, DIMENSION), [])
    await fill(store, vector_store_id, vectors)
    before = len(index.approximated)
    found = await found_ids(store, vector_store_id, vectors[0], 10)
    assert len(found) == 10 and found[0] == "c0"
    assert len(index.approximated) == before + 1  # through the index, not the exact fallback
