"""Toolgroups registered at run time in Redis: one hash (id -> group JSON) and a sorted set for their order."""

from __future__ import annotations

from typing import cast

from ferryman.api.registry import ToolGroup
from ferryman.errors import ConflictError, NotFoundError

from .redis_keys import SEQ
from .redis_scripts import RedisBase

TOOLGROUPS = "toolgroups"
TOOLGROUP_ORDER = "toolgroup_order"


class RedisToolGroups(RedisBase):
    """Toolgroup registrations over the backend's client."""

    async def create_toolgroup(self, group: ToolGroup) -> None:
        """Store a new registration, or ConflictError if its id is taken.

        Both structures change in one transaction, and the order entry only with a new hash field
        (``ZADD NX`` on an id that exists keeps its place).
        """
        seq = await self._db.incr(self._keys.global_(SEQ))
        async with self._db.pipeline(transaction=True) as pipe:
            pipe.hsetnx(self._keys.global_(TOOLGROUPS), group.identifier, group.model_dump_json())
            pipe.zadd(self._keys.global_(TOOLGROUP_ORDER), {group.identifier: seq}, nx=True)
            created, _ = await pipe.execute()
        if not created:
            raise ConflictError(f"toolgroup '{group.identifier}' already exists")

    async def get_toolgroup(self, toolgroup_id: str) -> ToolGroup:
        """One registration, or NotFoundError."""
        body = cast(str | None, await self._db.hget(self._keys.global_(TOOLGROUPS), toolgroup_id))
        if body is None:
            raise NotFoundError(f"toolgroup '{toolgroup_id}' not found")
        return ToolGroup.model_validate_json(body)

    async def list_toolgroups(self) -> list[ToolGroup]:
        """Every registration, in registration order."""
        async with self._db.pipeline(transaction=True) as pipe:
            pipe.zrange(self._keys.global_(TOOLGROUP_ORDER), 0, -1)
            pipe.hgetall(self._keys.global_(TOOLGROUPS))
            order, bodies = await pipe.execute()
        return [ToolGroup.model_validate_json(bodies[group_id]) for group_id in order if group_id in bodies]

    async def delete_toolgroup(self, toolgroup_id: str) -> bool:
        """Forget a registration; return whether it existed."""
        async with self._db.pipeline(transaction=True) as pipe:
            pipe.hdel(self._keys.global_(TOOLGROUPS), toolgroup_id)
            pipe.zrem(self._keys.global_(TOOLGROUP_ORDER), toolgroup_id)
            deleted, _ = await pipe.execute()
        return bool(deleted)
