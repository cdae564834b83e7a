"""The storage seam for toolgroups registered at run time (``POST /v1/toolgroups``)."""

from __future__ import annotations

from typing import Protocol

from ferryman.api.registry import ToolGroup


class ToolGroupStore(Protocol):
    """Toolgroup registrations: an id chosen by the caller, its provider, MCP endpoint and arguments."""

    async def create_toolgroup(self, group: ToolGroup) -> None:
        """Store a new registration.

        Raises:
            ConflictError: a group of that id is stored already.
        """
        ...

    async def get_toolgroup(self, toolgroup_id: str) -> ToolGroup:
        """One registration, or NotFoundError."""
        ...

    async def list_toolgroups(self) -> list[ToolGroup]:
        """Every registration, in registration order."""
        ...

    async def delete_toolgroup(self, toolgroup_id: str) -> bool:
        """Forget a registration; return whether it existed."""
        ...
