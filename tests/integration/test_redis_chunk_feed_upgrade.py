"""Redis's chunk feed: what each write records (versions, removals, their bound), and layout 8's chunks
converted to it once, at open."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from redis.asyncio import Redis
from replicas import redis_database

from ferryman.redis_url import split_prefix
from ferryman.storage.knowledge import ChunkRecord, VectorStoreFileRecord, VectorStoreRecord
from ferryman.storage.redis.lua_knowledge import KEPT_REMOVALS
from ferryman.storage.redis.script import Script, Scripts, values
from ferryman.storage.redis.scripts import LIBRARY
from ferryman.storage.redis.store import RedisStore
from ferryman.storage.redis.store_keys import CHUNK_REMOVALS, CHUNK_VERSIONS, SCHEMA, VECTOR_STORE, Keys
from ferryman.storage.redis.upgrades.runner import SCHEMA_VERSION
from ferryman.storage.search.chunk_feed import ChunkChanges, ChunkRemoval
from ferryman.storage.search.keyword_index import KeywordIndex

pytestmark = pytest.mark.anyio

NOW = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


@pytest.fixture()
def deployment() -> Iterator[tuple[str, str]]:
    """The test Redis URL and a fresh key prefix, its keys deleted afterwards."""
    with redis_database() as prefixed:
        yield split_prefix(prefixed)


@pytest.fixture()
async def admin(deployment: tuple[str, str]) -> AsyncIterator[Redis]:
    client = Redis.from_url(deployment[0], decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture()
async def store(deployment: tuple[str, str]) -> AsyncIterator[RedisStore]:
    opened = RedisStore(*deployment)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


def vec(*values: float) -> bytes:
    array = np.asarray(values, dtype=np.float32)
    return (array / np.linalg.norm(array)).astype("<f4").tobytes()


def a_store(vector_store_id: str = "vs_1") -> VectorStoreRecord:
    return VectorStoreRecord(
        vector_store_id=vector_store_id,
        name="docs",
        created_at=100,
        embedding_model="all-MiniLM-L6-v2",
        embedding_dimension=3,
        chunking_strategy={"type": "auto"},
        last_active_at=100,
    )


def chunk(chunk_id: str, text: str, file_id: str = "file_a", position: int = 0) -> ChunkRecord:
    return ChunkRecord(chunk_id, "vs_1", file_id, position, text, vec(1, position + 1, 0), len(text.split()))


def attached(file_id: str) -> VectorStoreFileRecord:
    return VectorStoreFileRecord(vector_store_id="vs_1", file_id=file_id, created_at=100)


async def everything(store: RedisStore, vector_store_id: str = "vs_1") -> ChunkChanges:
    changes = await store.chunk_changes(vector_store_id, None, texts=True, embeddings=True)
    assert changes is not None
    return changes


async def since(store: RedisStore, version: int) -> ChunkChanges:
    changes = await store.chunk_changes("vs_1", version, texts=True, embeddings=False)
    assert changes is not None
    return changes


# -- what each write records -----------------------------------------------------------------------------------------


async def test_a_file_removed_twice_is_one_removal_at_the_latest_version(store: RedisStore) -> None:
    await store.create_vector_store(a_store(), [attached("file_a")])
    await store.add_chunks("vs_1", [chunk("c1", "harbour cranes"), chunk("k1", "tide tables", "file_k")])
    before = (await everything(store)).version
    for text in ("pilot boats", "lighthouse keepers"):
        await store.add_vector_store_files("vs_1", [attached("file_a")])  # attached again: its chunks go
        await store.add_chunks("vs_1", [chunk("c1", text)])
    await store.add_vector_store_files("vs_1", [attached("file_a")])
    changes = await since(store, before)
    assert changes.removed == [ChunkRemoval(changes.version, "file_a")] and changes.added == []
    index = KeywordIndex()
    index.apply(await everything(store))
    assert [chunk_id for chunk_id, _ in index.best("tide", None, 5)] == ["k1"]
    assert index.best("lighthouse", None, 5) == []


async def test_removals_past_the_bound_make_an_older_index_start_again(
    store: RedisStore, deployment: tuple[str, str], admin: Redis
) -> None:
    files = [f"file_{i}" for i in range(KEPT_REMOVALS + 1)]
    await store.create_vector_store(a_store(), [attached(file_id) for file_id in files])
    await store.add_chunks("vs_1", [chunk(f"c_{file_id}", "harbour", file_id) for file_id in files])
    await store.add_chunks("vs_1", [chunk("kept", "tide", "file_kept")])
    before = (await everything(store)).version
    await store.add_vector_store_files("vs_1", [attached(file_id) for file_id in files])  # each loses its chunks
    assert await admin.zcard(Keys(deployment[1]).of(CHUNK_REMOVALS, "vs_1")) == KEPT_REMOVALS
    behind = await since(store, before)
    assert behind.complete and [e.chunk_id for e in behind.added] == ["kept"] and behind.removed == []
    assert await since(store, behind.version) == ChunkChanges(behind.version, False, [], [])


async def test_deleting_a_store_deletes_its_feed(store: RedisStore, deployment: tuple[str, str], admin: Redis) -> None:
    keys = Keys(deployment[1])
    await store.create_vector_store(a_store(), [attached("file_a")])
    await store.add_chunks("vs_1", [chunk("c1", "harbour cranes"), chunk("c2", "tide", "file_b")])
    await store.delete_vector_store_file("vs_1", "file_a")
    assert await admin.exists(keys.of(CHUNK_VERSIONS, "vs_1"), keys.of(CHUNK_REMOVALS, "vs_1")) == 2
    await store.delete_vector_store("vs_1")
    assert await admin.exists(keys.of(CHUNK_VERSIONS, "vs_1"), keys.of(CHUNK_REMOVALS, "vs_1")) == 0


@dataclass(frozen=True)
class Blobs:
    blobs: list[bytes]


async def test_a_raw_script_the_server_has_not_loaded_is_loaded_and_answers_bytes_as_they_are(
    deployment: tuple[str, str],
) -> None:
    client = Redis.from_url(deployment[0], decode_responses=True)
    try:
        scripts = Scripts(client, deployment[1], LIBRARY)
        unknown = Script(Blobs, f"-- {uuid.uuid4()}\nreturn {{OK, blobs[1], blobs[2]}}", values)  # a new digest
        blobs = [vec(1, 2, 3), b"\xff\x00\xfe"]
        assert await scripts.run_raw(unknown, Blobs(blobs)) == blobs
    finally:
        await client.aclose()


# -- layout 9: layout 8's chunks get version 0 -----------------------------------------------------------------------


async def _chunks_of_layout_8(store: RedisStore, admin: Redis, keys: Keys, count: int) -> int:
    """Two stores' chunks as layout 8 left them (no stamps, no removals' start); the first store's version."""
    for vector_store_id in ("vs_1", "vs_2"):
        await store.create_vector_store(a_store(vector_store_id), [attached("file_a")])
        chunks = [chunk(f"c{i}", f"harbour crane {i}", position=i) for i in range(count)]
        await store.add_chunks(vector_store_id, chunks)
        await admin.delete(keys.of(CHUNK_VERSIONS, vector_store_id))
        await admin.hdel(keys.of(VECTOR_STORE, vector_store_id), "removals_from")
        # Layout 8 listed its stores in a sorted set (layout 12 made them kernel records), which layout 9 walks.
        seq = await admin.hget(keys.of(VECTOR_STORE, vector_store_id), "seq")
        await admin.zadd(keys.global_("vector_stores"), {vector_store_id: int(seq or 0)})
    await admin.set(keys.global_(SCHEMA), 8)
    return int(await admin.hget(keys.of(VECTOR_STORE, "vs_1"), "version") or 0)


async def test_chunks_of_layout_8_are_found_and_followed_after_the_upgrade(
    store: RedisStore, deployment: tuple[str, str], admin: Redis
) -> None:
    keys = Keys(deployment[1])
    count = 1200  # more than one batch of the conversion
    version = await _chunks_of_layout_8(store, admin, keys, count)
    upgraded = RedisStore(*deployment)
    await upgraded.open()
    try:
        assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)
        changes = await everything(upgraded)
        assert changes.complete and changes.version == version
        assert sorted((e.chunk_id, e.version) for e in changes.added) == sorted((f"c{i}", 0) for i in range(count))
        assert await since(upgraded, version) == ChunkChanges(version, False, [], [])
        await upgraded.delete_vector_store_file("vs_1", "file_a")
        dropped = await since(upgraded, version)
        assert dropped.removed == [ChunkRemoval(dropped.version, "file_a")] and dropped.added == []
        hits = await upgraded.keyword_search("vs_2", "crane 7", None, 1)
        assert [hit.chunk.chunk_id for hit in hits] == ["c7"]
    finally:
        await upgraded.close()


async def test_a_chunk_conversion_that_died_midway_finishes_keeping_what_it_wrote(
    store: RedisStore, deployment: tuple[str, str], admin: Redis
) -> None:
    keys = Keys(deployment[1])
    version = await _chunks_of_layout_8(store, admin, keys, 3)
    # It had stamped one chunk of the first store, then died.
    await admin.zadd(keys.of(CHUNK_VERSIONS, "vs_1"), {"c0": 0})
    upgraded = RedisStore(*deployment)
    await upgraded.open()
    try:
        for vector_store_id in ("vs_1", "vs_2"):
            stamps = await admin.zrange(keys.of(CHUNK_VERSIONS, vector_store_id), 0, -1, withscores=True)
            assert stamps == [("c0", 0), ("c1", 0), ("c2", 0)]
        assert await admin.hget(keys.of(VECTOR_STORE, "vs_1"), "removals_from") == str(version)
        assert json.loads(await admin.get(keys.global_(SCHEMA)) or "0") == SCHEMA_VERSION
    finally:
        await upgraded.close()
