"""Toolgroups registered at run time: one row each, the group as JSON."""

from __future__ import annotations

from ferryman.api.registry import ToolGroup
from ferryman.errors import ConflictError, NotFoundError

from .registry import RegistryTables


class ToolGroupTables(RegistryTables):
    """Toolgroup registrations, over a :class:`Driver`."""

    async def create_toolgroup(self, group: ToolGroup) -> None:
        """Store a new registration, or ConflictError if its id is taken."""
        if not await self._register("toolgroups", "toolgroup_id", group.identifier, group.model_dump_json()):
            raise ConflictError(f"toolgroup '{group.identifier}' already exists")

    async def get_toolgroup(self, toolgroup_id: str) -> ToolGroup:
        """One registration, or NotFoundError."""
        body = await self._registration("toolgroups", "toolgroup_id", toolgroup_id)
        if body is None:
            raise NotFoundError(f"toolgroup '{toolgroup_id}' not found")
        return ToolGroup.model_validate_json(body)

    async def list_toolgroups(self) -> list[ToolGroup]:
        """Every registration, in registration order."""
        return [ToolGroup.model_validate_json(body) for body in await self._registrations("toolgroups")]

    async def delete_toolgroup(self, toolgroup_id: str) -> bool:
        """Forget a registration; return whether it existed."""
        return await self._unregister("toolgroups", "toolgroup_id", toolgroup_id)
