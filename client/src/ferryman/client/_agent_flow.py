"""The sans-I/O state machine of one agent turn, shared by :class:`Agent` and :class:`AsyncAgent`.

A flow says which call to make (:class:`ClientCall`), is fed what the server sends
back (each stream event, or the final object), turns it into the typed events
of :mod:`ferryman.client.events`, and says what the turn waits for
(:class:`Pending`). The agent's sync or async shell does the I/O: it makes the
calls, runs the client tools, asks for approvals and hands the answers back
with :meth:`TurnFlow.answer`, which names the call that resumes the same turn.
Once no call is left, :attr:`TurnFlow.failure` is the error the shell raises
when the turn did not complete.

:class:`AgentsFlow` runs a turn on the Agents API; the Responses API's flow is
in :mod:`ferryman.client._responses_flow`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from ferryman.api.agents import (
    Document,
    InferenceStep,
    MultitaskStrategy,
    StepCompletePayload,
    StepProgressPayload,
    StepStartPayload,
    ToolCallDelta,
    Turn,
    TurnAwaitingInputPayload,
    TurnCompletePayload,
    TurnStartPayload,
    TurnStreamChunk,
    TurnStreamError,
)
from ferryman.api.agents import TextDelta as WireTextDelta
from ferryman.api.approvals import ApprovalDecision, ApprovalRequest
from ferryman.api.content import ToolCall, ToolResponse, TurnInputMessage, content_to_text
from ferryman.api.responses import Response

from .errors import APIStatusError, TurnFailedError
from .events import (
    AgentEvent,
    StepCompleted,
    StepDelta,
    StepMetadata,
    StepProgress,
    StepStarted,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallIssued,
    TurnAwaitingInput,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
    Usage,
)

ENDED_EARLY = "the turn's stream ended before the turn did"
# How the server words the error answer of a turn (or a response) that failed while the caller waited for it.
_FAILED_CALL = re.compile(r"(?:turn|response) (?P<id>\S+) failed: (?P<message>.*)", re.DOTALL)


@dataclass(frozen=True)
class ClientCall:
    """One call of the client: the method at ``target`` (attribute names from the client) and its arguments."""

    target: tuple[str, ...]
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Pending:
    """What a paused turn waits for: results of client tool calls, decisions on server tool calls."""

    tool_calls: list[ToolCall] = field(default_factory=list)
    approvals: list[ApprovalRequest] = field(default_factory=list)


class TurnFlow(Protocol):
    """One turn, from its first call to its final object, without I/O."""

    def first_call(self) -> ClientCall:
        """The call that starts the turn."""
        ...

    def on_event(self, data: Any) -> list[AgentEvent]:
        """The typed events one stream event (its decoded ``data``) becomes."""
        ...

    def on_result(self, result: Any) -> list[AgentEvent]:
        """Take the final object of a call that was not streamed."""
        ...

    @property
    def pending(self) -> Pending | None:
        """What the turn waits for now, or None when it ended."""
        ...

    @property
    def result(self) -> Turn | Response:
        """The turn's final object (the last one the server sent)."""
        ...

    def answer(
        self, responses: list[ToolResponse], decisions: list[ApprovalDecision]
    ) -> tuple[list[AgentEvent], ClientCall]:
        """The events of handing the answers to the server, and the call that resumes the turn."""
        ...

    def rejected(self, error: APIStatusError) -> list[AgentEvent]:
        """The events of a call the server answered with an error: a ``TurnFailed`` when the turn failed.

        Raises:
            APIStatusError: ``error`` itself, when it does not say that the turn failed (a rejected request).
        """
        ...

    @property
    def failure(self) -> TurnFailedError | None:
        """Once no call is left: why the turn did not complete (a stream that stopped early is ``interrupted``)."""
        ...


class TurnEnd:
    """How a flow's turn ended: what both flows keep to say :attr:`TurnFlow.failure`."""

    _turn_id: str | None

    def __init__(self) -> None:
        """Nothing ended yet."""
        self._error: TurnFailedError | None = None
        self._completed = False

    @property
    def failure(self) -> TurnFailedError | None:
        """The turn's failure; ``interrupted`` when its events stopped before it completed or failed."""
        if self._error is None and not self._completed:
            return TurnFailedError(ENDED_EARLY, "interrupted", turn_id=self._turn_id)
        return self._error

    def _fail(
        self, event: TurnFailed, response_id: str | None = None, error: APIStatusError | None = None
    ) -> list[AgentEvent]:
        """Keep the failure ``event`` says (``error``: the error answer that said it) and pass the event on."""
        self._error = TurnFailedError(
            event.message,
            event.code,
            turn_id=event.turn_id or None,
            response_id=response_id,
            status_code=error.status_code if error else None,
            body=error.body if error else None,
        )
        self._error.__cause__ = error
        return [event]


def failed_call(error: APIStatusError) -> tuple[str, str]:
    """The id and the failure's message of an error answer that says a turn (or a response) failed.

    Raises:
        APIStatusError: ``error`` itself, when it says something else.
    """
    found = _FAILED_CALL.fullmatch(error.message)
    if found is None:
        raise error
    return found["id"], found["message"]


def stream_error(data: Any) -> TurnFailed | None:
    """The failure in an error event this client has no model for (``{"error": {...}}``, ``{"type": "error"}``)."""
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if not isinstance(error, dict):
        if data.get("type") != "error":
            return None
        error = data
    code, message = error.get("code"), error.get("message")
    return TurnFailed(
        turn_id=str(error.get("turn_id") or ""),
        code=code if isinstance(code, str) and code else "turn_failed",
        message=message if isinstance(message, str) else "the turn failed",
    )


class AgentsFlow(TurnEnd):
    """A turn of a stored agent, on the Agents API: paused turns are resumed with ``/resume``."""

    def __init__(
        self,
        agent_id: str,
        session_id: str,
        messages: list[TurnInputMessage],
        documents: list[Document] | None,
        stream: bool,
        client_tools: frozenset[str],
        multitask_strategy: MultitaskStrategy | None = None,
        webhook: str | None = None,
    ) -> None:
        """Prepare a turn of ``agent_id`` in ``session_id``, whose agent has the ``client_tools`` (their names);
        ``multitask_strategy`` goes with the turn's create (None: the server's default), ``webhook`` with the
        create and every resume (each is a run whose end the server posts)."""
        super().__init__()
        self._agent_id, self._session_id, self._stream = agent_id, session_id, stream
        self._client_tools, self._multitask_strategy = client_tools, multitask_strategy
        self._webhook = webhook
        self._messages, self._documents = messages, documents
        self._turn_id: str | None = None
        self._started = False
        self._pending: Pending | None = None
        self._result: Turn | None = None

    @classmethod
    def reader(cls, client_tools: frozenset[str]) -> AgentsFlow:
        """A flow that only translates the events of a turn someone else drives (it makes no call)."""
        return cls("", "", [], None, stream=True, client_tools=client_tools)

    def first_call(self) -> ClientCall:
        """``agents.turns.create``."""
        kwargs: dict[str, Any] = {"messages": self._messages, "stream": self._stream}
        if self._documents:
            kwargs["documents"] = self._documents
        if self._multitask_strategy is not None:
            kwargs["multitask_strategy"] = self._multitask_strategy
        return ClientCall(("agents", "turns", "create"), {**self._where(), **kwargs, **self._hook()})

    def on_event(self, data: Any) -> list[AgentEvent]:
        """Translate one Agents API stream event."""
        if isinstance(data, TurnStreamError):
            self._pending = None
            return self._fail(TurnFailed(turn_id=data.error.turn_id, code=data.error.code, message=data.error.message))
        if not isinstance(data, TurnStreamChunk):
            failed = stream_error(data)
            if failed is None:
                return []  # an event this client does not know: newer servers may add some
            self._pending = None
            return self._fail(failed.model_copy(update={"turn_id": failed.turn_id or self._turn_id or ""}))
        payload = data.event.payload
        if isinstance(payload, TurnStartPayload):
            return self._turn_started(payload.turn_id)
        turn_id = self._turn_id or ""
        if isinstance(payload, StepStartPayload):
            metadata = dict(payload.metadata or {})
            server_side = not metadata.get("client_tool_call_ids")
            meta = StepMetadata(server_side=server_side, **metadata)
            return [StepStarted(turn_id=turn_id, step_id=payload.step_id, step_type=payload.step_type, metadata=meta)]
        if isinstance(payload, StepProgressPayload):
            delta = _delta(payload.delta)
            if delta is None:
                return []
            return [StepProgress(turn_id=turn_id, step_id=payload.step_id, step_type=payload.step_type, delta=delta)]
        if isinstance(payload, StepCompletePayload):
            step = payload.step_details
            return [StepCompleted(turn_id=turn_id, step_id=step.step_id, step_type=step.step_type, step=step)]
        if isinstance(payload, TurnCompletePayload | TurnAwaitingInputPayload):
            return self.on_result(payload.turn)
        return []

    def on_result(self, result: Any) -> list[AgentEvent]:
        """Take the turn as it stands: completed, failed or awaiting input."""
        turn = result if isinstance(result, Turn) else Turn.model_validate(result)
        self._turn_id, self._result = turn.turn_id, turn
        self._pending = None
        if turn.status == "awaiting_input":
            calls = [c for c in turn.output_message.tool_calls or [] if c.tool_name in self._client_tools]
            self._pending = Pending(tool_calls=calls, approvals=list(turn.approval_requests or []))
            return [
                TurnAwaitingInput(turn_id=turn.turn_id, tool_calls=calls, approval_requests=self._pending.approvals)
            ]
        if turn.status == "failed":
            code, message = (turn.error.code, turn.error.message) if turn.error else ("failed", "the turn failed")
            return self._fail(TurnFailed(turn_id=turn.turn_id, code=code, message=message))
        self._completed = True
        return [
            TurnCompleted(
                turn_id=turn.turn_id,
                output_text=content_to_text(turn.output_message.content),
                step_count=len(turn.steps),
                usage=turn_usage(turn),
                result=turn,
            )
        ]

    @property
    def pending(self) -> Pending | None:
        """The client calls and approval requests of the paused turn."""
        return self._pending

    @property
    def result(self) -> Turn:
        """The turn as the server last sent it."""
        if self._result is None:
            raise RuntimeError("the turn has not answered yet")
        return self._result

    def answer(
        self, responses: list[ToolResponse], decisions: list[ApprovalDecision]
    ) -> tuple[list[AgentEvent], ClientCall]:
        """``agents.turns.resume`` of the same turn with the results and decisions."""
        kwargs = {"turn_id": self.result.turn_id, "tool_responses": responses, "approvals": decisions, **self._hook()}
        return [], ClientCall(("agents", "turns", "resume"), {**self._where(), **kwargs, "stream": self._stream})

    def rejected(self, error: APIStatusError) -> list[AgentEvent]:
        """A ``TurnFailed`` when the server answered that the turn failed (a call that was not streamed)."""
        turn_id, message = failed_call(error)
        self._turn_id, self._pending = turn_id, None
        return self._fail(TurnFailed(turn_id=turn_id, code=error.code or "turn_failed", message=message), error=error)

    def _where(self) -> dict[str, Any]:
        return {"agent_id": self._agent_id, "session_id": self._session_id}

    def _hook(self) -> dict[str, Any]:
        return {} if self._webhook is None else {"webhook": self._webhook}

    def _turn_started(self, turn_id: str) -> list[AgentEvent]:
        self._turn_id = turn_id
        if self._started:  # the server starts a resumed turn again; for the caller it is one turn
            return []
        self._started = True
        return [TurnStarted(turn_id=turn_id)]


def turn_usage(turn: Turn) -> Usage:
    """Tokens of every inference of a turn."""
    steps = [s.usage for s in turn.steps if isinstance(s, InferenceStep) and s.usage]
    return Usage(input_tokens=sum(u.input_tokens for u in steps), output_tokens=sum(u.output_tokens for u in steps))


def _delta(delta: WireTextDelta | ToolCallDelta) -> StepDelta | None:
    if isinstance(delta, WireTextDelta):
        return TextDelta(text=delta.text)
    if isinstance(delta.tool_call, ToolCall):
        return ToolCallIssued(tool_call=delta.tool_call, parsed=delta.parse_status == "succeeded")
    if delta.parse_status == "in_progress" and delta.tool_call:
        return ToolCallArgumentsDelta(delta=delta.tool_call)
    return None
