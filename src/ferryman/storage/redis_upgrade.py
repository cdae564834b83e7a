"""Bringing Redis data an older ferryman wrote up to this version's layout, once, whichever replica opens first.

The layout version is the ``schema`` key under the deployment's prefix
(absent: 1). A store that opens on older data takes the ``schema_lock`` (other
replicas wait on it), converts, then writes the version. Each step is
idempotent, so a replica that dies midway leaves data the next one finishes
converting once the lock expires.

Versions: 1 stored stream events as whole SSE frames; 2 stores their JSON data.
Replicas of an older version must be stopped before one of this version opens:
they would go on writing frames.
"""

from __future__ import annotations

from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.lock import Lock

from ferryman.errors import ConfigurationError

from .codec import frame_data
from .redis_keys import RESPONSE_EVENTS, SCHEMA, SCHEMA_LOCK, SEQ, TURN_EVENTS, Keys, event_member, stored_event

SCHEMA_VERSION = 2
LOCK_SECONDS = 30.0
_SCAN_BATCH = 500


async def upgrade(client: Redis, keys: Keys) -> None:
    """Convert the data under ``keys``' prefix to :data:`SCHEMA_VERSION` unless it is there already.

    Raises:
        ConfigurationError: the data was written by a newer ferryman.
    """
    if await _version(client, keys) == SCHEMA_VERSION:
        return
    lock: Lock = client.lock(keys.global_(SCHEMA_LOCK), timeout=LOCK_SECONDS)
    async with lock:
        if await _version(client, keys) == SCHEMA_VERSION:
            return  # another replica converted while this one waited
        fresh = not await client.exists(keys.global_(SEQ))  # every record ever stored drew a number
        for kind in () if fresh else (TURN_EVENTS, RESPONSE_EVENTS):
            async for key in client.scan_iter(match=_escaped(keys.base(kind)) + "*", count=_SCAN_BATCH):
                await _events_as_data(client, key)
                await lock.reacquire()
        await client.set(keys.global_(SCHEMA), SCHEMA_VERSION)


async def _version(client: Redis, keys: Keys) -> int:
    stored = await client.get(keys.global_(SCHEMA))
    version = 1 if stored is None else int(stored)
    if version > SCHEMA_VERSION:
        raise ConfigurationError(
            f"the Redis data under '{keys.prefix}' has layout version {version}; "
            f"this ferryman knows up to {SCHEMA_VERSION}: upgrade it"
        )
    return version


async def _events_as_data(client: Redis, key: str) -> None:
    """Replace the SSE frames of one events sorted set by their data, in one transaction (retried if it changed)."""

    async def convert(pipe: Pipeline) -> None:
        members = cast(list[tuple[str, float]], await pipe.zrange(key, 0, -1, withscores=True))
        stale: dict[str, Any] = {}
        fresh: dict[str, float] = {}
        for member, score in members:
            event = stored_event(member)
            data = frame_data(event.data)
            if data != event.data:
                stale[member] = score
                fresh[event_member(event.seq, data)] = score
        pipe.multi()  # type: ignore[no-untyped-call]
        if stale:
            pipe.zrem(key, *stale)
            pipe.zadd(key, fresh)

    await client.transaction(convert, key)


def _escaped(prefix: str) -> str:
    """``prefix`` as a literal in a ``SCAN MATCH`` pattern."""
    return "".join(f"\\{char}" if char in "*?[]\\" else char for char in prefix)
