"""The plain records of a stored turn, shared by the engine that writes them and the stores that keep them.

A leaf: it imports only the wire types, so that storage (below the engine)
and the engine's own port (:mod:`ferryman.engine.port`) both name them
without either importing the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ferryman.api.agents import Step, Turn, TurnError, TurnStatus
from ferryman.api.content import CompletionMessage, Message, TurnInputMessage


@dataclass
class TurnRecord:
    """A stored turn's own columns, without its steps.

    ``overrides`` holds the per-turn settings (toolgroups, tool_config) that a
    resume must apply again. ``lease_until`` is when a running turn counts as
    abandoned unless the replica running it renews the lease (see
    :meth:`ferryman.storage.base.TurnStore.renew_leases`); it is written, not read back.
    """

    turn_id: str
    session_id: str
    agent_id: str | None
    status: TurnStatus
    input_messages: list[TurnInputMessage]
    started_at: datetime
    overrides: dict[str, Any] = field(default_factory=dict)
    output_message: CompletionMessage | None = None
    infer_iters: int = 0
    error: TurnError | None = None
    completed_at: datetime | None = None
    lease_until: datetime | None = field(default=None, compare=False)


@dataclass(frozen=True)
class StoredEvent:
    """One stored stream event: its number and its JSON data (no SSE framing: that is the HTTP edge's)."""

    seq: int
    data: str


@dataclass(frozen=True)
class StepWrite:
    """A step to store, with the history messages it adds, in one transaction."""

    step: Step
    pending: bool = False
    messages: list[Message] = field(default_factory=list)


def turn_from_record(record: TurnRecord, steps: list[Step]) -> Turn:
    """Assemble the wire ``Turn`` of a record and its completed steps."""
    output = record.output_message or CompletionMessage(content="", stop_reason="end_of_turn")
    return Turn(
        turn_id=record.turn_id,
        session_id=record.session_id,
        input_messages=record.input_messages,
        steps=steps,
        output_message=output,
        started_at=record.started_at,
        completed_at=record.completed_at,
        status=record.status,
        error=record.error,
    )
