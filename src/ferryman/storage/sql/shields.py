"""Shields registered at run time: one row each, the registration as JSON."""

from __future__ import annotations

from ferryman.api.safety import ShieldResource
from ferryman.errors import ConflictError, NotFoundError

from .registry import RegistryTables


class ShieldTables(RegistryTables):
    """Shield registrations, over a :class:`Driver`."""

    async def create_shield(self, shield: ShieldResource) -> None:
        """Store a new registration, or ConflictError if its id is taken."""
        if not await self._register("shields", "shield_id", shield.identifier, shield.model_dump_json()):
            raise ConflictError(f"shield '{shield.identifier}' already exists")

    async def get_shield(self, shield_id: str) -> ShieldResource:
        """One registration, or NotFoundError."""
        body = await self._registration("shields", "shield_id", shield_id)
        if body is None:
            raise NotFoundError(f"shield '{shield_id}' not found")
        return ShieldResource.model_validate_json(body)

    async def list_shields(self) -> list[ShieldResource]:
        """Every registration, in registration order."""
        return [ShieldResource.model_validate_json(body) for body in await self._registrations("shields")]

    async def delete_shield(self, shield_id: str) -> bool:
        """Forget a registration; return whether it existed."""
        return await self._unregister("shields", "shield_id", shield_id)
