"""What the engine emits while a turn runs: its own events, which belong to no API.

Each façade encodes them for its wire (``services/turn_stream.py`` for the
Agents API, ``services/responses/stream.py`` for the Responses API). A new
kind of event is added here, as one more member of :data:`EngineEvent`, and
then once in each encoder.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ferryman.api.agents import Step, StepType, Turn
from ferryman.api.content import Message, ToolCall
from ferryman.errors import FailureCode


@dataclass(frozen=True, slots=True)
class TurnStarted:
    """A turn began, or a paused one resumed."""

    turn_id: str
    kind: Literal["turn_started"] = "turn_started"


@dataclass(frozen=True, slots=True)
class StepStarted:
    """A step began; ``metadata`` says what it is about (the shield, the client tool calls)."""

    step_type: StepType
    step_id: str
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: Literal["step_started"] = "step_started"


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Text the model produced since the last event."""

    step_id: str
    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """The model began a tool call; ``index`` tells the calls of one step apart while they stream."""

    step_id: str
    index: int
    call_id: str
    name: str
    kind: Literal["tool_call_started"] = "tool_call_started"


@dataclass(frozen=True, slots=True)
class ToolCallArgumentsDelta:
    """Argument text of a tool call, as the model produced it."""

    step_id: str
    index: int
    call_id: str
    delta: str
    kind: Literal["tool_call_arguments_delta"] = "tool_call_arguments_delta"


@dataclass(frozen=True, slots=True)
class ToolCallDone:
    """A tool call is complete; ``parsed`` says whether its arguments are a JSON object."""

    step_id: str
    index: int
    call: ToolCall
    parsed: bool
    kind: Literal["tool_call_done"] = "tool_call_done"


@dataclass(frozen=True, slots=True)
class HistoryCompacted:
    """Compaction put a summary in place of the oldest history, before an inference: ``history`` is what the
    model reads from here on (the summary first, unless the summary itself had to go), and all it reads of
    what came before."""

    history: list[Message]
    kind: Literal["history_compacted"] = "history_compacted"


@dataclass(frozen=True, slots=True)
class StepCompleted:
    """A step finished and is stored."""

    step: Step
    kind: Literal["step_completed"] = "step_completed"


@dataclass(frozen=True, slots=True)
class TurnAwaitingInput:
    """The turn paused: it waits for the results of client-side tool calls."""

    turn: Turn
    kind: Literal["turn_awaiting_input"] = "turn_awaiting_input"


@dataclass(frozen=True, slots=True)
class TurnCompleted:
    """The turn finished with the model's answer."""

    turn: Turn
    kind: Literal["turn_completed"] = "turn_completed"


@dataclass(frozen=True, slots=True)
class TurnFailed:
    """The turn ended in an error; it is stored as failed."""

    turn_id: str
    code: FailureCode
    message: str
    kind: Literal["turn_failed"] = "turn_failed"


EngineEvent = (
    TurnStarted
    | StepStarted
    | TextDelta
    | ToolCallStarted
    | ToolCallArgumentsDelta
    | ToolCallDone
    | HistoryCompacted
    | StepCompleted
    | TurnAwaitingInput
    | TurnCompleted
    | TurnFailed
)
"""Every event of a turn; ``kind`` tags each."""

Emit = Callable[[EngineEvent], Awaitable[None]]
"""Where the engine sends its events."""
