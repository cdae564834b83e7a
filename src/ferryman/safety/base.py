"""The safety seam: shields that inspect messages, and their registry."""

from __future__ import annotations

from typing import Protocol

from ferryman.api.agents import SafetyViolation
from ferryman.api.content import Message
from ferryman.errors import InvalidRequestError


class Shield(Protocol):
    """Inspects messages and reports a violation, or None when they are fine."""

    shield_id: str

    async def check(self, messages: list[Message]) -> SafetyViolation | None:
        """Return a violation found in ``messages``, if any."""
        ...


class ShieldRegistry:
    """The shields agents may name in ``input_shields`` and ``output_shields``."""

    def __init__(self, shields: list[Shield] | None = None) -> None:
        self._shields = {shield.shield_id: shield for shield in shields or []}

    def register(self, shield: Shield) -> None:
        """Add a shield."""
        self._shields[shield.shield_id] = shield

    def resolve(self, shield_ids: list[str], field: str) -> list[Shield]:
        """The shields of these ids.

        Raises:
            InvalidRequestError: an id names no registered shield.
        """
        missing = [shield_id for shield_id in shield_ids if shield_id not in self._shields]
        if missing:
            known = ", ".join(sorted(self._shields)) or "none"
            raise InvalidRequestError(f"unknown shield(s) {', '.join(missing)}; available: {known}", field)
        return [self._shields[shield_id] for shield_id in shield_ids]
