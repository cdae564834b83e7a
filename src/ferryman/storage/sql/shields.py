"""Shields registered at run time: one row each, the registration as JSON."""

from __future__ import annotations

from datetime import UTC, datetime

from ferryman.api.safety import ShieldResource
from ferryman.errors import ConflictError, NotFoundError

from .seam import Driver, count, first, rows


class ShieldTables:
    """Shield registrations, over a :class:`Driver`."""

    _db: Driver

    async def create_shield(self, shield: ShieldResource) -> None:
        """Store a new registration, or ConflictError if its id is taken."""
        inserted = await self._db.write(
            count(
                "INSERT INTO shields (shield_id, body, created_at) VALUES (:shield_id, :body, :created_at) "
                "ON CONFLICT (shield_id) DO NOTHING",
                shield_id=shield.identifier,
                body=shield.model_dump_json(),
                created_at=self._db.dialect.stamp(datetime.now(UTC)),
            )
        )
        if not inserted:
            raise ConflictError(f"shield '{shield.identifier}' already exists")

    async def get_shield(self, shield_id: str) -> ShieldResource:
        """One registration, or NotFoundError."""
        row = await self._db.read(first("SELECT body FROM shields WHERE shield_id = :shield_id", shield_id=shield_id))
        if row is None:
            raise NotFoundError(f"shield '{shield_id}' not found")
        return ShieldResource.model_validate_json(row[0])

    async def list_shields(self) -> list[ShieldResource]:
        """Every registration, in registration order."""
        found = await self._db.read(rows("SELECT body FROM shields ORDER BY id"))
        return [ShieldResource.model_validate_json(row[0]) for row in found]

    async def delete_shield(self, shield_id: str) -> bool:
        """Forget a registration; return whether it existed."""
        deleted = await self._db.write(count("DELETE FROM shields WHERE shield_id = :shield_id", shield_id=shield_id))
        return deleted > 0
