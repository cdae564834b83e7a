"""The storage seam for shields registered at run time (``POST /v1/shields``)."""

from __future__ import annotations

from typing import Protocol

from ferryman.api.safety import ShieldResource


class ShieldStore(Protocol):
    """Shield registrations: an id chosen by the caller, its provider, provider-side id and params."""

    async def create_shield(self, shield: ShieldResource) -> None:
        """Store a new registration.

        Raises:
            ConflictError: a shield of that id is stored already.
        """
        ...

    async def get_shield(self, shield_id: str) -> ShieldResource:
        """One registration, or NotFoundError."""
        ...

    async def list_shields(self) -> list[ShieldResource]:
        """Every registration, in registration order."""
        ...

    async def delete_shield(self, shield_id: str) -> bool:
        """Forget a registration; return whether it existed."""
        ...
