"""The typed events an :class:`~ferryman.client.Agent` turn yields, the same whichever API runs it.

The Agents API streams turns, steps and deltas; the Responses API streams
responses and output items. :class:`~ferryman.client.Agent` translates both
into these events, so that a caller (or :class:`~ferryman.client.EventLogger`)
handles one model. Every event carries ``turn_id``: the server's turn id
(Agents API) or the id of the turn's first response (Responses API).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ferryman.api.agents import Step, StepType, Turn
from ferryman.api.approvals import ApprovalRequest
from ferryman.api.content import ToolCall
from ferryman.api.responses import Response

from ._streaming import ServerEvent


class Usage(BaseModel):
    """Tokens the model used during a turn, over all its inferences."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens


class TurnStarted(BaseModel):
    """A turn began (once per turn: resuming it after client tools does not start it again)."""

    type: Literal["turn_started"] = "turn_started"
    turn_id: str


class StepMetadata(BaseModel):
    """What a step is about.

    ``server_side`` is False for a step whose tool calls the client runs (a
    client tool step); the server's own fields (``client_tool_call_ids``,
    ``approval_call_ids``, ``shield``) are kept as extra fields.
    """

    model_config = ConfigDict(extra="allow")

    server_side: bool = True


class StepStarted(BaseModel):
    """A step began."""

    type: Literal["step_started"] = "step_started"
    turn_id: str
    step_id: str
    step_type: StepType
    metadata: StepMetadata = Field(default_factory=StepMetadata)


class TextDelta(BaseModel):
    """Text the model produced since the last delta."""

    type: Literal["text"] = "text"
    text: str


class ToolCallIssued(BaseModel):
    """The model issued a complete tool call."""

    type: Literal["tool_call_issued"] = "tool_call_issued"
    tool_call: ToolCall
    parsed: bool = True
    """Whether the arguments were a JSON object (otherwise ``tool_call.arguments`` is the raw text)."""


class ToolCallArgumentsDelta(BaseModel):
    """Argument text of a tool call while the model writes it; ``call_id`` when the wire names it."""

    type: Literal["tool_call_arguments"] = "tool_call_arguments"
    delta: str
    call_id: str | None = None


StepDelta = Annotated[TextDelta | ToolCallIssued | ToolCallArgumentsDelta, Field(discriminator="type")]


class StepProgress(BaseModel):
    """A step made progress."""

    type: Literal["step_progress"] = "step_progress"
    turn_id: str
    step_id: str
    step_type: StepType
    delta: StepDelta


class StepCompleted(BaseModel):
    """A step finished; ``step`` is the step as the Agents API stores it (built alike for the Responses API)."""

    type: Literal["step_completed"] = "step_completed"
    turn_id: str
    step_id: str
    step_type: StepType
    step: Step


class TurnAwaitingInput(BaseModel):
    """The turn waits: for the results of client tool calls and for decisions on server tool calls.

    The agent answers both by itself (running its client tools and asking
    its ``on_approval`` callback) and resumes the same turn.
    """

    type: Literal["turn_awaiting_input"] = "turn_awaiting_input"
    turn_id: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    approval_requests: list[ApprovalRequest] = Field(default_factory=list)


class TurnCompleted(BaseModel):
    """The turn finished with the model's answer.

    ``result`` is the server's final object: the :class:`~ferryman.api.agents.Turn`
    (Agents API) or the last :class:`~ferryman.api.responses.Response`.
    """

    type: Literal["turn_completed"] = "turn_completed"
    turn_id: str
    output_text: str
    step_count: int
    usage: Usage = Field(default_factory=Usage)
    result: Turn | Response


class TurnFailed(BaseModel):
    """The turn ended in an error on the server."""

    type: Literal["turn_failed"] = "turn_failed"
    turn_id: str
    code: str
    message: str


AgentEvent = Annotated[
    TurnStarted | StepStarted | StepProgress | StepCompleted | TurnAwaitingInput | TurnCompleted | TurnFailed,
    Field(discriminator="type"),
]
"""One event of an agent's turn, told apart by ``type``."""


def from_server(stream: Iterable[ServerEvent[Any]], client_tools: Iterable[str] = ()) -> Iterator[AgentEvent]:
    """The typed events of an Agents API turn's server events, as :class:`~ferryman.client.Agent` yields them.

    For a turn the caller streams itself (``client.agents.turns.create(..., stream=True)``) or
    replays (``client.agents.turns.events(...)``): nothing is answered or resumed. A turn
    that was paused and resumed starts once.

    Args:
        stream: The server's events of one turn.
        client_tools: Names of the client tools whose calls :class:`TurnAwaitingInput` lists.

    Yields:
        Each typed event, in order.
    """
    # Imported here: the flow that translates builds the events this module defines.
    from ._agent_flow import AgentsFlow

    flow = AgentsFlow.reader(frozenset(client_tools))
    for sent in stream:
        yield from flow.on_event(sent.data)


async def afrom_server(
    stream: AsyncIterable[ServerEvent[Any]], client_tools: Iterable[str] = ()
) -> AsyncIterator[AgentEvent]:
    """:func:`from_server` of an :class:`~ferryman.client.AsyncStream`."""
    from ._agent_flow import AgentsFlow

    flow = AgentsFlow.reader(frozenset(client_tools))
    async for sent in stream:
        for event in flow.on_event(sent.data):
            yield event


__all__ = [
    "AgentEvent",
    "afrom_server",
    "from_server",
    "StepCompleted",
    "StepDelta",
    "StepMetadata",
    "StepProgress",
    "StepStarted",
    "TextDelta",
    "ToolCallArgumentsDelta",
    "ToolCallIssued",
    "TurnAwaitingInput",
    "TurnCompleted",
    "TurnFailed",
    "TurnStarted",
    "Usage",
]
