"""Redis layout 18: a response's stored events move into its record's log in the storage kernel.

Layout 17 kept a finished response's stream events in ``response_events:<response id>``, members
``"<seq>:<event JSON>"`` scored by their number. Each response's events become its kernel record's ``events`` log
(entries numbered from 0 in their order, as a finished response writes them), written through the kernel itself
with one rewrite per response; then the sorted set goes. Events of a response that no record holds (deleted by a
version that left them) belong to nothing the API reaches: they go unwritten.

A rewrite replaces the whole log, and the sorted set goes only once it is written: a conversion that died midway,
run again, writes the same log again and goes on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import cast

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.errors import NotFoundError
from ferryman.storage.domain.responses import events_written
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.storage.redis.record_moves import move_each
from ferryman.storage.redis.store_keys import Keys, stored_event

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_RESPONSE_EVENTS = "response_events"


async def move_response_events(client: Redis, keys: Keys, lock: Lock, escaped: Callable[[str], str]) -> None:
    """Write the events of every response of layout 17 into its record's log, then delete its sorted set.

    Args:
        client: The deployment's client.
        keys: Its keys.
        lock: The upgrade's lock, renewed after each response.
        escaped: A prefix as a literal in a ``SCAN MATCH`` pattern.
    """

    async def move(kernel: RedisKernel, response_id: str) -> None:
        key = keys.of(_RESPONSE_EVENTS, response_id)
        events = [stored_event(member).data for member in cast(list[str], await client.zrange(key, 0, -1))]
        with contextlib.suppress(NotFoundError):  # no record holds the response: its events belong to nothing
            await kernel.write([events_written(response_id, events)])
        await client.delete(key)

    await move_each(client, keys, lock, _RESPONSE_EVENTS, escaped, move)
