"""Redis layout 9: each chunk carries the store version that wrote it, and each store its recent removals.

Layout 8 kept a store's chunks in three hashes by chunk id, with one ``version`` per store that moved at every
write; in-process indexes reloaded a store whole when it moved. Layout 9 adds what the chunk feed
(:mod:`ferryman.storage.search.chunk_feed`) reads: a sorted set of chunk id -> version per store
(``chunk_versions``), the files whose chunks a write dropped (``chunk_removals``) and the oldest version the
removals still answer for (``removals_from`` in the store's hash).

The conversion stamps every existing chunk with version 0, older than any version an index can hold, and starts
each store's removals at its current version; no index exists yet (replicas of layout 8 are stopped). Stamps are
added only where absent, so a conversion that died midway, run again, finishes without changing what it wrote.
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.storage.redis.store_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's may move on.
_VECTOR_STORES = "vector_stores"
_VECTOR_STORE = "vector_store"
_CHUNK_FILES = "chunk_files"
_CHUNK_VERSIONS = "chunk_versions"
_BATCH = 500


async def stamp_chunks(client: Redis, keys: Keys, lock: Lock) -> None:
    """Give every chunk of every vector store version 0, and every store its removals' start."""
    stores = cast(list[str], await client.zrange(keys.global_(_VECTOR_STORES), 0, -1))
    for vector_store_id in stores:
        await _stamp_store(client, keys, vector_store_id, lock)


async def _stamp_store(client: Redis, keys: Keys, vector_store_id: str, lock: Lock) -> None:
    stamps = keys.of(_CHUNK_VERSIONS, vector_store_id)
    batch: dict[str, float] = {}
    async for chunk_id, _ in client.hscan_iter(keys.of(_CHUNK_FILES, vector_store_id), count=_BATCH):
        batch[chunk_id] = 0
        if len(batch) == _BATCH:  # a store of many chunks must not outlast the lock
            await client.zadd(stamps, batch, nx=True)
            batch.clear()
            await lock.reacquire()
    if batch:
        await client.zadd(stamps, batch, nx=True)
    store = keys.of(_VECTOR_STORE, vector_store_id)
    version = await client.hget(store, "version")
    await client.hsetnx(store, "removals_from", version or "0")
    await lock.reacquire()
