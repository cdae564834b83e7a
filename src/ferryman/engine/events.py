"""What the engine emits while a turn runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ferryman.api.agents import EventPayload


@dataclass(frozen=True)
class TurnFailed:
    """The turn ended in an error; it is stored as failed."""

    turn_id: str
    code: str
    message: str


EngineEvent = EventPayload | TurnFailed
Emit = Callable[[EngineEvent], Awaitable[None]]
