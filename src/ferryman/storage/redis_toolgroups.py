"""Toolgroups registered at run time in Redis: one hash (id -> group JSON) and a sorted set for their order."""

from __future__ import annotations

from ferryman.api.registry import ToolGroup
from ferryman.errors import ConflictError, NotFoundError

from .redis_registry import RedisRegistry

TOOLGROUPS = "toolgroups"
TOOLGROUP_ORDER = "toolgroup_order"


class RedisToolGroups(RedisRegistry):
    """Toolgroup registrations over the backend's client."""

    async def create_toolgroup(self, group: ToolGroup) -> None:
        """Store a new registration, or ConflictError if its id is taken."""
        if not await self._register(TOOLGROUPS, TOOLGROUP_ORDER, group.identifier, group.model_dump_json(), False):
            raise ConflictError(f"toolgroup '{group.identifier}' already exists")

    async def get_toolgroup(self, toolgroup_id: str) -> ToolGroup:
        """One registration, or NotFoundError."""
        body = await self._registration(TOOLGROUPS, toolgroup_id)
        if body is None:
            raise NotFoundError(f"toolgroup '{toolgroup_id}' not found")
        return ToolGroup.model_validate_json(body)

    async def list_toolgroups(self) -> list[ToolGroup]:
        """Every registration, in registration order."""
        return [ToolGroup.model_validate_json(body) for body in await self._registrations(TOOLGROUPS, TOOLGROUP_ORDER)]

    async def delete_toolgroup(self, toolgroup_id: str) -> bool:
        """Forget a registration; return whether it existed."""
        return await self._unregister(TOOLGROUPS, TOOLGROUP_ORDER, toolgroup_id)
