"""Redis layout 17: items move into the storage kernel's records.

Layout 16 kept a container's items (a conversation's, a response's input, a fork holder's) in two keys:
``items:<container id>``, the item ids scored in insertion order, and ``item_bodies:<container id>``, their JSON
by id. Each container's items become kernel records under it (id ``<container id>/<item id>``, the item's JSON
their body, no owner of their own), written through the kernel itself in their order, a batch at a time; then
the container's two keys go. A container that no record holds any more (deleted by a version that left its
items) belongs to nothing the API reaches: its keys go and its items are not written.

Every write is an upsert, which keeps a record already written, and a container's keys go only once its items
are written: a conversion that died midway, run again, writes the rest after them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import cast

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.errors import NotFoundError
from ferryman.storage.domain.kinds import ITEM
from ferryman.storage.kernel.ops import Put
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.storage.redis.record_moves import BATCH, move_each
from ferryman.storage.redis.store_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_ITEMS = "items"
_ITEM_BODIES = "item_bodies"


async def move_items(client: Redis, keys: Keys, lock: Lock, escaped: Callable[[str], str]) -> None:
    """Write the items of every container of layout 16 as kernel records, then delete the container's keys.

    Args:
        client: The deployment's client.
        keys: Its keys.
        lock: The upgrade's lock, renewed after each container and batch (many items must not outlast it).
        escaped: A prefix as a literal in a ``SCAN MATCH`` pattern.
    """

    async def move(kernel: RedisKernel, container: str) -> None:
        order, bodies_key = keys.of(_ITEMS, container), keys.of(_ITEM_BODIES, container)
        async with client.pipeline(transaction=True) as pipe:
            pipe.zrange(order, 0, -1)
            pipe.hgetall(bodies_key)
            ids, bodies = cast(tuple[list[str], dict[str, str]], await pipe.execute())
        puts = [
            Put(ITEM, f"{container}/{item_id}", json.loads(bodies[item_id]), parent=container, mode="upsert")
            for item_id in ids
            if item_id in bodies
        ]
        with contextlib.suppress(NotFoundError):  # no record holds the container: its items belong to nothing
            for start in range(0, len(puts), BATCH):
                await kernel.write(puts[start : start + BATCH])
                await lock.reacquire()
        await client.delete(order, bodies_key)

    await move_each(client, keys, lock, _ITEMS, escaped, move)
