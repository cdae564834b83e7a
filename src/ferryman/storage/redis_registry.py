"""Registrations in Redis: one hash (id -> JSON body) and a sorted set that keeps their order.

Models, toolgroups and shields registered at run time share this layout; each
kind names its own two keys.
"""

from __future__ import annotations

from typing import cast

from .redis_keys import SEQ
from .redis_scripts import RedisBase


class RedisRegistry(RedisBase):
    """Registrations of any kind, over the backend's client."""

    async def _register(self, bodies: str, order: str, entry_id: str, body: str, replace: bool) -> bool:
        """Store an entry (``replace``: over one of the same id); return whether its id was new.

        Both keys change in one transaction, and the order entry only for a new id (``ZADD NX`` keeps an
        existing one's place); a number drawn for an id not new is left unused, a gap in the order.
        """
        seq = await self._db.incr(self._keys.global_(SEQ))
        async with self._db.pipeline(transaction=True) as pipe:
            if replace:
                pipe.hset(self._keys.global_(bodies), entry_id, body)
            else:
                pipe.hsetnx(self._keys.global_(bodies), entry_id, body)
            pipe.zadd(self._keys.global_(order), {entry_id: seq}, nx=True)
            created, _ = await pipe.execute()
        return bool(created)

    async def _registration(self, bodies: str, entry_id: str) -> str | None:
        """One entry's body, or None."""
        return cast(str | None, await self._db.hget(self._keys.global_(bodies), entry_id))

    async def _registrations(self, bodies: str, order: str) -> list[str]:
        """Every entry's body, in registration order."""
        async with self._db.pipeline(transaction=True) as pipe:
            pipe.zrange(self._keys.global_(order), 0, -1)
            pipe.hgetall(self._keys.global_(bodies))
            ids, found = await pipe.execute()
        return [found[entry_id] for entry_id in ids if entry_id in found]

    async def _unregister(self, bodies: str, order: str, entry_id: str) -> bool:
        """Forget an entry; return whether it existed."""
        async with self._db.pipeline(transaction=True) as pipe:
            pipe.hdel(self._keys.global_(bodies), entry_id)
            pipe.zrem(self._keys.global_(order), entry_id)
            deleted, _ = await pipe.execute()
        return bool(deleted)
