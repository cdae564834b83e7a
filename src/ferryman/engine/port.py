"""The engine's port to storage: the few writes a running turn makes, and nothing more.

The engine writes through :class:`TurnWriter` alone; every turn store
(SQL, Redis, and the wrappers services hand in) has these methods, so it
satisfies the port structurally and is passed as it is: no adapter sits on
the hot path. Starting, resuming, reading and deleting turns are the
services' business, not the loop's.
"""

from __future__ import annotations

from typing import Protocol

from ferryman.api.content import Message, TurnInputMessage
from ferryman.turn_records import StepWrite, TurnRecord


class TurnWriter(Protocol):
    """What the engine writes of a running turn: its steps, its redacted input and its end."""

    async def save_step(self, turn_id: str, write: StepWrite, infer_iters: int) -> None:
        """Store (or replace) a step, its history messages and the turn's inference count."""
        ...

    async def redact_turn_input(self, turn_id: str, inputs: list[TurnInputMessage], messages: list[Message]) -> None:
        """Replace a running turn's input messages and its own history messages, in one write.

        Raises:
            NotFoundError: the turn no longer exists.
            ConflictError: the turn no longer runs.
        """
        ...

    async def finish_turn(self, record: TurnRecord, last: StepWrite | None = None) -> None:
        """Store a turn's final or awaiting state (status, output, error, completion time), with its last step.

        Only a running or queued turn is finished: one that ended meanwhile keeps that end.
        """
        ...
