"""Quota counters in the Redis replicas share: request windows, and slots of running turns.

Request windows are the ``limits`` library's Redis storage, on this module's
connection pool. Running turns are a sorted set per principal whose members
are turn ids, each qualified by the replica holding it, scored with the end of
a lease: the replica running a turn renews it every third of a lease and
removes it when the run ends, so the slots of a replica that died free
themselves once their lease runs out. Taking a slot is one script: drop
expired members, count, add. Two replicas admitting the same turn at once (a
resume sent to both) hold two members, never one shared: the one whose
admission fails frees only its own, not the slot the turn runs under.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import redis.asyncio as aioredis
from limits.aio.storage import RedisStorage, Storage
from redis.exceptions import RedisError

from ferryman.ids import new_hex
from ferryman.redis_url import connect

log = logging.getLogger(__name__)

# Redis's clock, not each replica's, decides when a lease ends.
_TAKE = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

_RENEW = """
local t = redis.call('TIME')
local until_ms = t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', until_ms, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 0
"""


def redis_counters(url: str, prefix: str, lease_seconds: float = 30.0) -> tuple[Storage, RedisTurnSlots]:
    """Request windows and turn slots over one connection pool (the slots' ``close`` releases it)."""
    slots = RedisTurnSlots(url, prefix, lease_seconds)
    pool: Any = slots.client.connection_pool  # limits types its client options as scalars; it passes them on
    windows = RedisStorage(url, implementation="redispy", key_prefix=f"{prefix}quota", connection_pool=pool)
    return windows, slots


class RedisTurnSlots:
    """Running-turn slots per principal, shared by every replica that names the same Redis.

    Args:
        url: ``redis://…`` (without the key prefix).
        prefix: Namespace of every key this uses.
        lease_seconds: How long a slot lasts unrenewed.
    """

    def __init__(self, url: str, prefix: str, lease_seconds: float = 30.0) -> None:
        self.client: aioredis.Redis = connect(url, max_connections=64)
        self._prefix = prefix
        self._lease_ms = int(lease_seconds * 1000)
        self._take = self.client.register_script(_TAKE)
        self._renew = self.client.register_script(_RENEW)
        self._held: dict[str, set[str]] = {}
        self._replica = new_hex()
        self._task: asyncio.Task[None] | None = None

    def _key(self, principal_id: str) -> str:
        return f"{self._prefix}quota:turns:{principal_id}"

    def _member(self, turn_id: str) -> str:
        return f"{turn_id}@{self._replica}"

    async def open(self) -> None:
        """Start renewing the slots this replica holds."""
        self._task = asyncio.create_task(self._renew_forever(), name="quota-slots")

    async def close(self) -> None:
        """Stop renewing and disconnect (the slots still held run out with their lease)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.client.aclose()

    async def take(self, principal_id: str, turn_id: str, limit: int) -> bool:
        """Take a slot unless the principal holds ``limit`` live ones on any replica."""
        taken = await self._take(keys=[self._key(principal_id)], args=[self._member(turn_id), self._lease_ms, limit])
        if taken:
            self._held.setdefault(principal_id, set()).add(turn_id)
        return bool(taken)

    async def give_back(self, principal_id: str, turn_id: str) -> None:
        """Free the slot."""
        held = self._held.get(principal_id, set())
        held.discard(turn_id)
        if not held:
            self._held.pop(principal_id, None)
        await self.client.zrem(self._key(principal_id), self._member(turn_id))

    async def renew(self) -> None:
        """Extend the lease of every slot this replica holds."""
        for principal_id, turns in list(self._held.items()):
            if turns:
                members = [self._member(turn_id) for turn_id in turns]
                await self._renew(keys=[self._key(principal_id)], args=[self._lease_ms, *members])

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self._lease_ms / 3000)  # a period, not a wait for an event
            try:
                await self.renew()
            except (RedisError, OSError) as exc:
                log.warning("running-turn quota slots not renewed: %s", exc)
