"""Shields registered at run time in Redis: one hash (id -> registration JSON) and a sorted set for their order."""

from __future__ import annotations

from typing import cast

from ferryman.api.safety import ShieldResource
from ferryman.errors import ConflictError, NotFoundError

from .redis_keys import SEQ
from .redis_scripts import RedisBase

SHIELDS = "shields"
SHIELD_ORDER = "shield_order"


class RedisShields(RedisBase):
    """Shield registrations over the backend's client."""

    async def create_shield(self, shield: ShieldResource) -> None:
        """Store a new registration, or ConflictError if its id is taken.

        Both structures change in one transaction, and the order entry only with a new hash field
        (``ZADD NX`` on an id that exists keeps its place).
        """
        seq = await self._db.incr(self._keys.global_(SEQ))
        async with self._db.pipeline(transaction=True) as pipe:
            pipe.hsetnx(self._keys.global_(SHIELDS), shield.identifier, shield.model_dump_json())
            pipe.zadd(self._keys.global_(SHIELD_ORDER), {shield.identifier: seq}, nx=True)
            created, _ = await pipe.execute()
        if not created:
            raise ConflictError(f"shield '{shield.identifier}' already exists")

    async def get_shield(self, shield_id: str) -> ShieldResource:
        """One registration, or NotFoundError."""
        body = cast(str | None, await self._db.hget(self._keys.global_(SHIELDS), shield_id))
        if body is None:
            raise NotFoundError(f"shield '{shield_id}' not found")
        return ShieldResource.model_validate_json(body)

    async def list_shields(self) -> list[ShieldResource]:
        """Every registration, in registration order."""
        async with self._db.pipeline(transaction=True) as pipe:
            pipe.zrange(self._keys.global_(SHIELD_ORDER), 0, -1)
            pipe.hgetall(self._keys.global_(SHIELDS))
            order, bodies = await pipe.execute()
        return [ShieldResource.model_validate_json(bodies[shield_id]) for shield_id in order if shield_id in bodies]

    async def delete_shield(self, shield_id: str) -> bool:
        """Forget a registration; return whether it existed."""
        async with self._db.pipeline(transaction=True) as pipe:
            pipe.hdel(self._keys.global_(SHIELDS), shield_id)
            pipe.zrem(self._keys.global_(SHIELD_ORDER), shield_id)
            deleted, _ = await pipe.execute()
        return bool(deleted)
