"""A turn in memory while it runs: what the loop reads and changes as the turn goes on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from opentelemetry.trace import Span

from ferryman.api.agents import Step, Turn
from ferryman.api.content import Message, ToolResponseMessage, TurnInputMessage, UserMessage
from ferryman.turn_records import TurnRecord, turn_from_record

from .approvals import Ruling
from .memory import MemoryDocument
from .plan import TurnPlan


class InputCopies(Protocol):
    """What else keeps a turn's input as sent (a response's input items), to keep it in step with the turn's.

    Each is told once the turn's store holds the new form.
    """

    async def redacted(self, given: list[Message], redacted: list[Message]) -> None:
        """The input shields redacted the turn's input ``given`` to ``redacted``."""
        ...

    async def withheld(self) -> None:
        """An input shield blocked the turn's input: every part of it gives way to a placeholder."""
        ...


@dataclass
class TurnState:
    """A turn in memory while it runs: its record, plan, history and completed steps."""

    record: TurnRecord
    plan: TurnPlan
    history: list[Message]
    steps: list[Step] = field(default_factory=list)
    documents: list[MemoryDocument] = field(default_factory=list)
    """Documents too large to inline: indexed and searched by a memory_retrieval step before inference."""
    ruled: Ruling | None = None
    """Calls of an earlier turn the caller ruled on (Responses): run or refused before the first inference."""
    fresh: int | None = None
    """How many of the history's last messages are the turn's own input (None: one per input message)."""
    input_copies: InputCopies | None = None
    """What else keeps the input as sent (the Responses API's input items), to redact or withhold it there too."""
    span: Span | None = None
    """The run's ``invoke_agent`` span, started where the turn was accepted (``tracing.start_turn_span``)."""

    def turn(self) -> Turn:
        """The wire form of the turn as it stands."""
        return turn_from_record(self.record, self.steps)

    def turn_input(self) -> list[Message]:
        """The turn's new messages: what its input shields check."""
        count = len(self.record.input_messages) if self.fresh is None else self.fresh
        return self.history[len(self.history) - count :] if count else []

    def replace_turn_input(self, messages: list[Message]) -> None:
        """Put the turn's new messages in their (redacted) form back in the history the model reads."""
        self.history = [*self.history[: len(self.history) - len(messages)], *messages]

    def redacted_inputs(self, given: list[Message], redacted: list[Message]) -> list[TurnInputMessage]:
        """The record's input messages with the input shields' redactions of :meth:`turn_input` applied.

        The input messages are the turn input's user and tool messages, in order (the turn input
        may hold more: the calls a Responses input answers); a changed one takes the redacted
        content (and a user message's context, when that changed too: a withheld one has none).
        """
        pairs = [
            (g, r) for g, r in zip(given, redacted, strict=True) if isinstance(g, UserMessage | ToolResponseMessage)
        ]
        return [
            sent if before == after else sent.model_copy(update=_changed(before, after))
            for sent, (before, after) in zip(self.record.input_messages, pairs, strict=True)
        ]


def _changed(before: Message, after: Message) -> dict[str, object]:
    update: dict[str, object] = {"content": after.content}
    if isinstance(before, UserMessage) and isinstance(after, UserMessage) and before.context != after.context:
        update["context"] = after.context
    return update
