"""Shields registered at run time in Redis: one hash (id -> registration JSON) and a sorted set for their order."""

from __future__ import annotations

from ferryman.api.safety import ShieldResource
from ferryman.errors import ConflictError, NotFoundError

from .redis_registry import RedisRegistry

SHIELDS = "shields"
SHIELD_ORDER = "shield_order"


class RedisShields(RedisRegistry):
    """Shield registrations over the backend's client."""

    async def create_shield(self, shield: ShieldResource) -> None:
        """Store a new registration, or ConflictError if its id is taken."""
        if not await self._register(SHIELDS, SHIELD_ORDER, shield.identifier, shield.model_dump_json(), False):
            raise ConflictError(f"shield '{shield.identifier}' already exists")

    async def get_shield(self, shield_id: str) -> ShieldResource:
        """One registration, or NotFoundError."""
        body = await self._registration(SHIELDS, shield_id)
        if body is None:
            raise NotFoundError(f"shield '{shield_id}' not found")
        return ShieldResource.model_validate_json(body)

    async def list_shields(self) -> list[ShieldResource]:
        """Every registration, in registration order."""
        return [ShieldResource.model_validate_json(body) for body in await self._registrations(SHIELDS, SHIELD_ORDER)]

    async def delete_shield(self, shield_id: str) -> bool:
        """Forget a registration; return whether it existed."""
        return await self._unregister(SHIELDS, SHIELD_ORDER, shield_id)
