"""Moving records an older Redis layout kept as hashes into the storage kernel, written once for every kind.

A layout before the kernel kept each record in a hash (``<kind>:<id>``), its ids
in a sorted set in creation order and its owners in ``owners:<kind>``. A
conversion walks the ids in batches, writes each record whose hash is still
there through the kernel itself (an upsert, which keeps an existing record's
number, time and owner), then deletes those hashes (or only the record's fields,
where the hash holds other data that stays); so a conversion that died midway,
run again, writes the rest after them. What a kind's hash becomes is
the caller's (:data:`ToPut`); deleting the index and the owners, once every
record is moved, is the caller's too.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import cast

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.storage.domain.kinds import SCHEMA
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.ops import Put
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.storage.redis.store_keys import Keys

BATCH = 100
SCAN_BATCH = 500

ToPut = Callable[[str, list[str | None], Owner | None], Put | None]
"""The kernel write of one record from its id, its hash's fields and its owner (None: not whole, or converted)."""


def stored_owner(stored: str | None) -> Owner | None:
    """An owner as layouts from 4 on stored it (typed JSON: ``{"kind", "id", "attributes"}``)."""
    return None if stored is None else Owner.from_json(json.loads(stored))


async def move_hashes(
    client: Redis,
    keys: Keys,
    lock: Lock,
    *,
    kind: str,
    index: str,
    fields: Sequence[str],
    to_put: ToPut,
    drop: Sequence[str] | None = None,
) -> None:
    """Write every record of ``kind`` listed in ``index`` as a kernel record with its owner, deleting its hash.

    Args:
        client: The deployment's client.
        keys: Its keys.
        lock: The upgrade's lock, renewed after each batch (many records must not outlast it).
        kind: The old hashes' kind (``<kind>:<id>``; owners in ``owners:<kind>``).
        index: The sorted set of their ids, in creation order.
        fields: The hash fields ``to_put`` reads, in its order.
        to_put: What a record becomes.
        drop: The fields that go from a moved record's hash, the others staying; None: the whole hash goes.
    """
    kernel = RedisKernel(client, SCHEMA, prefix=f"{keys.prefix}k:")  # where a store's kernel keeps its keys
    await kernel.open()
    try:
        start = 0
        while ids := cast(list[str], await client.zrange(index, start, start + BATCH - 1)):
            await _move(client, kernel, keys, kind, ids, fields, to_put, drop)
            await lock.reacquire()
            start += len(ids)
    finally:
        await kernel.close()


async def _move(
    client: Redis,
    kernel: RedisKernel,
    keys: Keys,
    kind: str,
    ids: list[str],
    fields: Sequence[str],
    to_put: ToPut,
    drop: Sequence[str] | None,
) -> None:
    """Write one batch (the records whose hash is still there), then delete their hashes (or ``drop``)."""
    async with client.pipeline(transaction=False) as pipe:
        for record_id in ids:
            pipe.hmget(keys.of(kind, record_id), list(fields))
        pipe.hmget(keys.of("owners", kind), ids)
        *found, owners = cast(list[list[str | None]], await pipe.execute())
    made = (
        to_put(record_id, values, stored_owner(owner))
        for record_id, values, owner in zip(ids, found, owners, strict=True)
    )
    puts = [put for put in made if put is not None]
    if not puts:
        return
    await kernel.write(puts)
    moved = [keys.of(kind, put.id) for put in puts]
    if drop is None:
        await client.delete(*moved)
        return
    async with client.pipeline(transaction=False) as pipe:
        for key in moved:
            pipe.hdel(key, *drop)
        await pipe.execute()


async def move_each(
    client: Redis,
    keys: Keys,
    lock: Lock,
    kind: str,
    escaped: Callable[[str], str],
    move: Callable[[RedisKernel, str], Awaitable[None]],
) -> None:
    """Run ``move`` with the store's kernel on the id of every key ``<kind>:<id>`` an old layout left (a key per
    record, which no index lists), renewing ``lock`` after each; ``move`` deletes what it moved.

    Args:
        client: The deployment's client.
        keys: Its keys.
        lock: The upgrade's lock.
        kind: The old keys' kind.
        escaped: A prefix as a literal in a ``SCAN MATCH`` pattern.
        move: Writes one record's data through the kernel, then deletes its old keys.
    """
    base = keys.base(kind)
    kernel = RedisKernel(client, SCHEMA, prefix=f"{keys.prefix}k:")  # where a store's kernel keeps its keys
    await kernel.open()
    try:
        async for key in client.scan_iter(match=escaped(base) + "*", count=SCAN_BATCH):
            await move(kernel, key.removeprefix(base))
            await lock.reacquire()
    finally:
        await kernel.close()


async def delete_scanned(client: Redis, lock: Lock, match: str) -> None:
    """Delete every key the ``SCAN MATCH`` pattern ``match`` finds, a batch at a time, renewing ``lock`` between
    batches (an old layout's per-record indexes, which no list names)."""
    batch: list[str] = []
    async for key in client.scan_iter(match=match, count=SCAN_BATCH):
        batch.append(key)
        if len(batch) == SCAN_BATCH:
            await client.delete(*batch)
            batch.clear()
            await lock.reacquire()
    if batch:
        await client.delete(*batch)
