"""Toolgroups registered at run time: one row each, the group as JSON."""

from __future__ import annotations

from datetime import UTC, datetime

from ferryman.api.registry import ToolGroup
from ferryman.errors import ConflictError, NotFoundError

from .seam import Driver, count, first, rows


class ToolGroupTables:
    """Toolgroup registrations, over a :class:`Driver`."""

    _db: Driver

    async def create_toolgroup(self, group: ToolGroup) -> None:
        """Store a new registration, or ConflictError if its id is taken."""
        inserted = await self._db.write(
            count(
                "INSERT INTO toolgroups (toolgroup_id, body, created_at) VALUES (:toolgroup_id, :body, :created_at) "
                "ON CONFLICT (toolgroup_id) DO NOTHING",
                toolgroup_id=group.identifier,
                body=group.model_dump_json(),
                created_at=self._db.dialect.stamp(datetime.now(UTC)),
            )
        )
        if not inserted:
            raise ConflictError(f"toolgroup '{group.identifier}' already exists")

    async def get_toolgroup(self, toolgroup_id: str) -> ToolGroup:
        """One registration, or NotFoundError."""
        row = await self._db.read(
            first("SELECT body FROM toolgroups WHERE toolgroup_id = :toolgroup_id", toolgroup_id=toolgroup_id)
        )
        if row is None:
            raise NotFoundError(f"toolgroup '{toolgroup_id}' not found")
        return ToolGroup.model_validate_json(row[0])

    async def list_toolgroups(self) -> list[ToolGroup]:
        """Every registration, in registration order."""
        found = await self._db.read(rows("SELECT body FROM toolgroups ORDER BY id"))
        return [ToolGroup.model_validate_json(row[0]) for row in found]

    async def delete_toolgroup(self, toolgroup_id: str) -> bool:
        """Forget a registration; return whether it existed."""
        deleted = await self._db.write(
            count("DELETE FROM toolgroups WHERE toolgroup_id = :toolgroup_id", toolgroup_id=toolgroup_id)
        )
        return deleted > 0
