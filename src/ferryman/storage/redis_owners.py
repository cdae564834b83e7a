"""Owners of records in Redis: one hash per kind of record (``owners:<kind>``), record id -> owner JSON."""

from __future__ import annotations

from typing import cast

from .kernel.model import Owner
from .owners import dump_owner, load_owner
from .redis_scripts import RedisBase

OWNERS = "owners"


class RedisOwners(RedisBase):
    """Record owners over the backend's client."""

    async def set_owner(self, kind: str, record_id: str, owner: Owner) -> None:
        """Record (or replace) the owner of a record."""
        await self._db.hset(self._keys.of(OWNERS, kind), record_id, dump_owner(owner))

    async def owners_of(self, kind: str, record_ids: list[str]) -> dict[str, Owner]:
        """The owners of those of these records that have one."""
        if not record_ids:
            return {}
        ids = sorted(set(record_ids))
        values = cast(list[str | None], await self._db.hmget(self._keys.of(OWNERS, kind), ids))
        return {record_id: load_owner(value) for record_id, value in zip(ids, values, strict=True) if value is not None}

    async def forget_owner(self, kind: str, record_id: str) -> None:
        """Drop a deleted record's owner."""
        await self._db.hdel(self._keys.of(OWNERS, kind), record_id)
