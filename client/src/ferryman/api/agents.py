"""Agents API models: agents, sessions, turns, steps and their stream events."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .approvals import ApprovalDecision, ApprovalRequest, RequireApproval
from .content import (
    URL,
    CompletionMessage,
    InterleavedContent,
    ToolCall,
    ToolDef,
    ToolResponse,
    TurnInputMessage,
)
from .inference import ResponseFormat, SamplingParams, ToolConfig, ToolPromptFormat
from .limits import (
    MAX_DOCUMENTS,
    MAX_MESSAGES,
    MAX_SHIELDS,
    MAX_TOOLS,
    AtMost,
    Id,
    Instructions,
    Name,
    RequiredId,
)
from .webhooks import WebhookUrl


class ToolGroupWithArgs(BaseModel):
    """A toolgroup (or one tool of it, ``group/tool``) with arguments bound by the agent."""

    name: Name
    args: dict[str, Any] = Field(default_factory=dict)
    require_approval: RequireApproval | None = None
    """Which of the group's tools wait for the caller's approval (a ferryman extension)."""


ToolGroupRef = Name | ToolGroupWithArgs
ShieldIds = Annotated[list[Id], AtMost(MAX_SHIELDS)]
ToolGroupRefs = Annotated[list[ToolGroupRef], AtMost(MAX_TOOLS)]


class Document(BaseModel):
    """A document attached to a turn; its text is given to the model with the user's message."""

    content: InterleavedContent | URL
    mime_type: str


class Attachment(BaseModel):
    """A file produced by a turn."""

    content: InterleavedContent | URL
    mime_type: str


class _ToolSettings(BaseModel):
    sampling_params: SamplingParams | None = Field(default_factory=SamplingParams)
    input_shields: ShieldIds | None = Field(default_factory=list)
    output_shields: ShieldIds | None = Field(default_factory=list)
    toolgroups: ToolGroupRefs | None = Field(default_factory=list)
    client_tools: Annotated[list[ToolDef], AtMost(MAX_TOOLS)] | None = Field(default_factory=list)
    tool_choice: str | None = None
    tool_prompt_format: ToolPromptFormat | None = None
    tool_config: ToolConfig | None = None
    max_infer_iters: int | None = Field(default=10, ge=1)

    @model_validator(mode="after")
    def _merge_tool_config(self) -> _ToolSettings:
        if self.tool_config is None:
            settings: dict[str, Any] = {}
            if self.tool_choice:
                settings["tool_choice"] = self.tool_choice
            if self.tool_prompt_format:
                settings["tool_prompt_format"] = self.tool_prompt_format
            self.tool_config = ToolConfig(**settings)
            return self
        if self.tool_choice and self.tool_choice != self.tool_config.tool_choice:
            raise ValueError("tool_choice conflicts with tool_config.tool_choice; set only tool_config")
        if self.tool_prompt_format and self.tool_prompt_format != self.tool_config.tool_prompt_format:
            raise ValueError("tool_prompt_format conflicts with tool_config.tool_prompt_format; set only tool_config")
        return self


class ContextManagement(BaseModel):
    """How a session's history is kept within the model's context (a ferryman extension of the agent).

    ``truncation`` (the default) drops the oldest messages from the prompt until it fits, ``compaction``
    puts a summary in their place once the prompt passes ``compact_threshold`` tokens (or the context),
    ``disabled`` refuses a turn whose prompt does not fit (``context_length_exceeded``).
    """

    strategy: Literal["truncation", "compaction", "disabled"] = "truncation"
    compact_threshold: int | None = Field(default=None, ge=1, le=10_000_000)


class AgentConfig(_ToolSettings):
    """Everything that defines an agent."""

    model: RequiredId
    instructions: Instructions
    name: Name | None = None
    enable_session_persistence: bool | None = False
    response_format: ResponseFormat | None = None
    require_approval: RequireApproval | None = None
    """Which server tools wait for the caller's approval before they run (a ferryman extension; default none)."""
    tool_input_shields: ShieldIds | None = Field(default_factory=list)
    """Shields that check a server tool call's arguments before it runs (a ferryman extension)."""
    tool_output_shields: ShieldIds | None = Field(default_factory=list)
    """Shields that check a server tool's result before the model reads it (a ferryman extension)."""
    context_management: ContextManagement | None = None
    """How the session's history is kept within the model's context (a ferryman extension; default truncation)."""


class Agent(BaseModel):
    """A stored agent."""

    agent_id: str
    agent_config: AgentConfig
    created_at: datetime


class SafetyViolation(BaseModel):
    """What a shield found."""

    violation_level: Literal["info", "warn", "error"]
    user_message: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class _StepBase(BaseModel):
    turn_id: str
    step_id: str
    started_at: datetime | None = None
    completed_at: datetime | None = None


class TokenUsage(BaseModel):
    """Tokens one inference used (a ferryman addition to the step)."""

    input_tokens: int = 0
    output_tokens: int = 0


class ContextNote(BaseModel):
    """What an inference left out of its prompt to fit the model's context (a ferryman addition to the step)."""

    strategy: Literal["truncation", "compaction"]
    dropped_messages: int = 0
    """The oldest history messages the model did not read."""
    summarized_messages: int = 0
    """The history messages a summary stood in for."""
    prompt_tokens: int | None = None
    """The prompt's tokens as counted (or estimated) once fitted."""
    context_length: int | None = None


class InferenceStep(_StepBase):
    """One call of the model."""

    model_config = ConfigDict(protected_namespaces=())

    step_type: Literal["inference"] = "inference"
    model_response: CompletionMessage
    usage: TokenUsage | None = None
    context_management: ContextNote | None = None
    """What the prompt left out of the history to fit the model's context (None: nothing)."""


class ToolExecutionStep(_StepBase):
    """The execution of the tool calls of one inference step."""

    step_type: Literal["tool_execution"] = "tool_execution"
    tool_calls: list[ToolCall]
    tool_responses: list[ToolResponse]
    approval_requests: list[ApprovalRequest] | None = None
    """The calls that wait for the caller's approval while the step is pending (a ferryman extension)."""


class ShieldCallStep(_StepBase):
    """A safety check of the input or output."""

    step_type: Literal["shield_call"] = "shield_call"
    violation: SafetyViolation | None = None


class MemoryRetrievalStep(_StepBase):
    """Context retrieved from vector stores."""

    step_type: Literal["memory_retrieval"] = "memory_retrieval"
    vector_db_ids: str
    inserted_context: InterleavedContent


Step = Annotated[
    InferenceStep | ToolExecutionStep | ShieldCallStep | MemoryRetrievalStep,
    Field(discriminator="step_type"),
]
StepType = Literal["inference", "tool_execution", "shield_call", "memory_retrieval"]
TurnStatus = Literal["queued", "in_progress", "awaiting_input", "completed", "failed"]

MultitaskStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]
"""What a new turn (or response) does while another runs in its session (or conversation): ``reject`` it
with 409, ``enqueue`` it (it runs once those before it ended; ``queued`` until then), ``interrupt`` the
running one (cancelled, its completed steps kept) and run once it stopped, or ``rollback`` (the running one
is cancelled and deleted, as if never sent) (a ferryman extension)."""


class TurnError(BaseModel):
    """Why a turn failed."""

    code: str
    message: str


class Turn(BaseModel):
    """Everything needed to answer one user message, client tool round trips included.

    ``status`` and ``error`` are ferryman additions: clients that do not know
    them ignore them.
    """

    turn_id: str
    session_id: str
    input_messages: list[TurnInputMessage]
    steps: list[Step]
    output_message: CompletionMessage
    output_attachments: list[Attachment] | None = Field(default_factory=list)
    started_at: datetime
    completed_at: datetime | None = None
    status: TurnStatus = "completed"
    error: TurnError | None = None
    approval_requests: list[ApprovalRequest] | None = None
    """The server tool calls an ``awaiting_input`` turn holds back until the caller decides (a ferryman extension)."""


class Session(BaseModel):
    """A conversation with an agent: its turns in the order they started."""

    session_id: str
    session_name: str
    turns: list[Turn]
    started_at: datetime


class PaginatedResponse(BaseModel):
    """One page of a list."""

    data: list[dict[str, Any]]
    has_more: bool
    url: str | None = None


# ---- stream events -------------------------------------------------------


class TextDelta(BaseModel):
    """Text the model produced since the last event."""

    type: Literal["text"] = "text"
    text: str


class ToolCallDelta(BaseModel):
    """Progress of one tool call: raw text while it streams, the parsed call when done."""

    type: Literal["tool_call"] = "tool_call"
    tool_call: ToolCall | str
    parse_status: Literal["started", "in_progress", "failed", "succeeded"]


ContentDelta = Annotated[TextDelta | ToolCallDelta, Field(discriminator="type")]


class TurnStartPayload(BaseModel):
    """A turn began (or resumed)."""

    event_type: Literal["turn_start"] = "turn_start"
    turn_id: str


class StepStartPayload(BaseModel):
    """A step began."""

    event_type: Literal["step_start"] = "step_start"
    step_type: StepType
    step_id: str
    metadata: dict[str, Any] | None = Field(default_factory=dict)


class StepProgressPayload(BaseModel):
    """A step made progress."""

    event_type: Literal["step_progress"] = "step_progress"
    step_type: StepType
    step_id: str
    delta: ContentDelta


class StepCompletePayload(BaseModel):
    """A step finished; ``step_details`` is the stored step."""

    event_type: Literal["step_complete"] = "step_complete"
    step_type: StepType
    step_id: str
    step_details: Step


class TurnCompletePayload(BaseModel):
    """The turn finished with the model's answer."""

    event_type: Literal["turn_complete"] = "turn_complete"
    turn: Turn


class TurnAwaitingInputPayload(BaseModel):
    """The turn waits for the results of client-side tool calls."""

    event_type: Literal["turn_awaiting_input"] = "turn_awaiting_input"
    turn: Turn


EventPayload = Annotated[
    TurnStartPayload
    | StepStartPayload
    | StepProgressPayload
    | StepCompletePayload
    | TurnCompletePayload
    | TurnAwaitingInputPayload,
    Field(discriminator="event_type"),
]


class TurnEvent(BaseModel):
    """Envelope of one event."""

    payload: EventPayload


class TurnStreamChunk(BaseModel):
    """One SSE ``data:`` line of a turn stream."""

    event: TurnEvent


class TurnStreamFailure(BaseModel):
    """Why a streamed turn failed."""

    code: str
    message: str
    turn_id: str


class TurnStreamError(BaseModel):
    """The SSE ``data:`` line that ends the stream of a failed turn."""

    error: TurnStreamFailure


class StepResponse(BaseModel):
    """Body of ``get step``."""

    step: Step


# ---- requests and simple responses ---------------------------------------


class CreateAgentRequest(BaseModel):
    """Body of ``POST /agents``."""

    agent_config: AgentConfig


class AgentCreated(BaseModel):
    """Answer to ``POST /agents``."""

    agent_id: str


class CreateSessionRequest(BaseModel):
    """Body of ``POST /agents/{id}/session``."""

    session_name: Name


class SessionCreated(BaseModel):
    """Answer to ``POST /agents/{id}/session`` (and to a session's fork)."""

    session_id: str


class ForkSessionRequest(BaseModel):
    """Body of ``POST /agents/{id}/session/{session_id}/fork`` (a ferryman extension)."""

    turn_id: RequiredId
    """The last turn the fork keeps: its history is the session's up to and including this turn."""
    session_name: Name | None = None
    """The fork's name (default: the original's)."""


class CreateTurnRequest(BaseModel):
    """Body of ``POST …/turn``."""

    messages: Annotated[list[TurnInputMessage], Field(min_length=1), AtMost(MAX_MESSAGES)]
    stream: bool | None = False
    documents: Annotated[list[Document], AtMost(MAX_DOCUMENTS)] | None = None
    toolgroups: ToolGroupRefs | None = None
    tool_config: ToolConfig | None = None
    webhook: WebhookUrl | None = None
    """Where the server posts ``turn.completed``, ``turn.failed`` or ``turn.awaiting_input`` when this run ends
    (a ferryman extension; Standard Webhooks signatures)."""
    multitask_strategy: MultitaskStrategy = "reject"
    """What the turn does while another turn runs in the session (a ferryman extension)."""


class ResumeTurnRequest(BaseModel):
    """Body of ``POST …/turn/{turn_id}/resume``."""

    tool_responses: Annotated[list[ToolResponse], AtMost(MAX_MESSAGES)] = Field(default_factory=list)
    approvals: Annotated[list[ApprovalDecision], AtMost(MAX_MESSAGES)] = Field(default_factory=list)
    """Decisions on the turn's approval requests (a ferryman extension)."""
    stream: bool | None = False
    webhook: WebhookUrl | None = None
    """Where the server posts the turn's state when this run of it ends (as :attr:`CreateTurnRequest.webhook`)."""
