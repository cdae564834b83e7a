"""Redis layout 20: file batches move into the storage kernel's records, under their vector stores.

Layout 19 kept each batch in a hash (``batch:<id>``: its store's id, its creation time, ``cancelled`` 0 or 1).
Each becomes a ``file_batch`` record under its store's record, its body the ``FileBatchRecord``'s fields, created
at its own time, no owner of its own, written through the kernel itself; then its hash goes. A batch whose store no
record holds belongs to nothing the API reaches: its hash and its files' index (``batch_files:<id>``) go and nothing
is written. What indexes the other batches' files (``batch_files:<id>``, and the store's ``vs_batches``) stays.

The write is an upsert, which keeps a record already written, and a hash goes only once its record is written: a
conversion that died midway, run again, writes the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.errors import NotFoundError
from ferryman.storage.domain.kinds import FILE_BATCH
from ferryman.storage.kernel.ops import Put
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.storage.redis.record_moves import move_each
from ferryman.storage.redis.store_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_BATCH = "batch"
_BATCH_FILES = "batch_files"
_FIELDS = ("vector_store_id", "created_at", "cancelled")


async def move_file_batches(client: Redis, keys: Keys, lock: Lock, escaped: Callable[[str], str]) -> None:
    """Write every file batch of layout 19 as a kernel record under its store, then delete its hash.

    Args:
        client: The deployment's client.
        keys: Its keys.
        lock: The upgrade's lock, renewed after each batch.
        escaped: A prefix as a literal in a ``SCAN MATCH`` pattern.
    """

    async def move(kernel: RedisKernel, batch_id: str) -> None:
        key = keys.of(_BATCH, batch_id)
        found = cast(list[str | None], await client.hmget(key, list(_FIELDS)))
        vector_store_id, created_at, cancelled = found
        if vector_store_id is not None and created_at is not None:
            body = {
                "batch_id": batch_id,
                "vector_store_id": vector_store_id,
                "created_at": int(created_at),
                "cancelled": cancelled == "1",
            }
            put = Put(FILE_BATCH, batch_id, body, parent=vector_store_id, mode="upsert", at=float(created_at))
            try:
                await kernel.write([put])
            except NotFoundError:  # no record holds its store: it belongs to nothing, nor does its files' index
                await client.delete(keys.of(_BATCH_FILES, batch_id))
        await client.delete(key)

    await move_each(client, keys, lock, _BATCH, escaped, move)
