"""An agent turn run as responses in a server conversation (``Agent(..., api="responses")``), without I/O.

One turn may take several responses: a response that ends on client function
calls (or on calls held for approval) is answered by the next response of the
same conversation, whose input is the ``function_call_output`` (and
``mcp_approval_response``) items. The output items become the same steps the
Agents API stores: the model's messages and function calls an ``inference``
step, each hosted tool call a server-side ``tool_execution`` step, and the
client's tool results a ``tool_execution`` step that is not server-side.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ferryman.api.agents import InferenceStep, MultitaskStrategy, Step, ToolExecutionStep
from ferryman.api.approvals import ApprovalDecision, ApprovalRequest
from ferryman.api.content import CompletionMessage, ToolCall, ToolResponse, content_to_text
from ferryman.api.response_events import (
    CodeInterpreterCallCodeDelta,
    FunctionCallArgumentsDelta,
    McpCallArgumentsDelta,
    OutputItemAdded,
    OutputItemDone,
    OutputTextDelta,
    ResponseCancelled,
    ResponseCompleted,
    ResponseCreated,
    ResponseFailed,
    ResponseIncomplete,
)
from ferryman.api.responses import (
    CodeInterpreterCallItem,
    FileSearchCallItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    Item,
    McpApprovalRequestItem,
    McpApprovalResponseItem,
    McpCallItem,
    MessageItem,
    OutputText,
    Response,
    WebSearchCallItem,
)

from ._agent_flow import ClientCall, Pending, TurnEnd, failed_call, stream_error
from .errors import APIStatusError
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

_HostedItem = FileSearchCallItem | McpCallItem | CodeInterpreterCallItem | WebSearchCallItem


class ResponsesFlow(TurnEnd):
    """A turn as responses in one conversation; ``request`` holds what every response of it repeats."""

    def __init__(
        self,
        conversation_id: str,
        request: dict[str, Any],
        input_items: list[Any],
        stream: bool,
        multitask_strategy: MultitaskStrategy | None = None,
        webhook: str | None = None,
    ) -> None:
        """Prepare a turn in ``conversation_id`` (``request``: model, instructions, tools and options);
        ``multitask_strategy`` goes with the turn's first response (None: the server's default), ``webhook``
        with each of its responses (each is a run whose end the server posts)."""
        super().__init__()
        self._conversation, self._request, self._input, self._stream = conversation_id, request, input_items, stream
        self._multitask_strategy, self._webhook = multitask_strategy, webhook
        self._turn_id: str | None = None
        self._steps: list[Step] = []
        self._open: _OpenInference | None = None
        self._call_ids: dict[str, str] = {}
        self._usage = Usage()
        self._pending: Pending | None = None
        self._result: Response | None = None

    def first_call(self) -> ClientCall:
        """``responses.create`` with the turn's input."""
        call = self._create(self._input)
        if self._multitask_strategy is not None:  # the later responses of the turn follow it: nothing runs then
            call.kwargs["multitask_strategy"] = self._multitask_strategy
        return call

    def on_event(self, data: Any) -> list[AgentEvent]:
        """Translate one Responses API stream event."""
        if isinstance(data, ResponseCreated):
            if self._turn_id is not None:
                return []
            self._turn_id = data.response.id
            return [TurnStarted(turn_id=data.response.id)]
        if isinstance(data, OutputItemAdded):
            return self._item_added(data.item)
        if isinstance(data, OutputItemDone):
            return self._item_done(data.item)
        if isinstance(data, OutputTextDelta):
            return self._progress(data.item_id, TextDelta(text=data.delta))
        if isinstance(data, FunctionCallArgumentsDelta | McpCallArgumentsDelta | CodeInterpreterCallCodeDelta):
            delta = ToolCallArgumentsDelta(delta=data.delta, call_id=self._call_ids.get(data.item_id, data.item_id))
            return self._progress(data.item_id, delta)
        if isinstance(data, ResponseCompleted | ResponseIncomplete | ResponseFailed | ResponseCancelled):
            return self._settle(data.response)
        failed = stream_error(data)
        if failed is None:
            return []
        self._pending = None
        return [*self._close_inference(), *self._fail(failed.model_copy(update={"turn_id": self.turn_id}))]

    def on_result(self, result: Any) -> list[AgentEvent]:
        """Take a response that was not streamed: its items become steps as if they had streamed."""
        response = result if isinstance(result, Response) else Response.model_validate(result)
        if self._turn_id is None:
            self._turn_id = response.id
        for item in response.output:
            self._item_added(item)
            self._item_done(item)
        return self._settle(response)

    @property
    def pending(self) -> Pending | None:
        """The function calls and approval requests the last response ended on."""
        return self._pending

    @property
    def result(self) -> Response:
        """The last response."""
        if self._result is None:
            raise RuntimeError("the turn has not answered yet")
        return self._result

    def answer(
        self, responses: list[ToolResponse], decisions: list[ApprovalDecision]
    ) -> tuple[list[AgentEvent], ClientCall]:
        """The client's tool step, and the next response of the conversation with the results and decisions."""
        events: list[AgentEvent] = []
        pending = self._pending or Pending()
        if pending.tool_calls:
            step = ToolExecutionStep(
                turn_id=self.turn_id,
                step_id=self._client_step_id(),
                completed_at=_now(),
                tool_calls=pending.tool_calls,
                tool_responses=responses,
            )
            self._steps.append(step)
            events.append(self._step_completed(step))
        items: list[Any] = [
            FunctionCallOutputItem(call_id=r.call_id, output=content_to_text(r.content)).model_dump(exclude_none=True)
            for r in responses
        ]
        items += [
            McpApprovalResponseItem(approval_request_id=d.call_id, approve=d.approve, reason=d.reason).model_dump(
                exclude_none=True
            )
            for d in decisions
        ]
        return events, self._create(items)

    def rejected(self, error: APIStatusError) -> list[AgentEvent]:
        """A ``TurnFailed`` when the server answered that the response failed (a call that was not streamed)."""
        response_id, message = failed_call(error)
        self._turn_id, self._pending = self._turn_id or response_id, None
        failed = TurnFailed(turn_id=self.turn_id, code=error.code or "turn_failed", message=message)
        return self._fail(failed, response_id, error)

    @property
    def turn_id(self) -> str:
        """The id of the turn's first response."""
        return self._turn_id or ""

    def _client_step_id(self) -> str:
        return f"{self.result.id}_client_tools"

    def _create(self, input_items: list[Any]) -> ClientCall:
        kwargs = {**self._request, "input": input_items, "conversation": self._conversation, "stream": self._stream}
        if self._webhook is not None:
            kwargs["webhook"] = self._webhook
        return ClientCall(("responses", "create"), kwargs)

    def _item_added(self, item: Item) -> list[AgentEvent]:
        if isinstance(item, FunctionCallItem) and item.id:
            self._call_ids[item.id] = item.call_id
        if isinstance(item, MessageItem | FunctionCallItem):
            if self._open is not None:
                return []
            self._open = _OpenInference(item.id or f"step_{len(self._steps)}")
            return [self._started(self._open.step_id, "inference", server_side=True)]
        if isinstance(item, _HostedItem):
            return [*self._close_inference(), self._started(_item_id(item), "tool_execution", server_side=True)]
        return []

    def _item_done(self, item: Item) -> list[AgentEvent]:
        if isinstance(item, MessageItem):
            self._ensure_open(item).text.append(_message_text(item))
            return []
        if isinstance(item, FunctionCallItem):
            call = _call(item.call_id, item.name, item.arguments)
            self._ensure_open(item).calls.append(call)
            return self._progress(
                item.id or "", ToolCallIssued(tool_call=call, parsed=isinstance(call.arguments, dict))
            )
        if isinstance(item, _HostedItem):
            call, response = _hosted_call(item)
            step = ToolExecutionStep(
                turn_id=self.turn_id,
                step_id=_item_id(item),
                completed_at=_now(),
                tool_calls=[call],
                tool_responses=[response],
            )
            self._steps.append(step)
            issued = StepProgress(
                turn_id=self.turn_id,
                step_id=step.step_id,
                step_type="tool_execution",
                delta=ToolCallIssued(tool_call=call),
            )
            return [issued, self._step_completed(step)]
        return []

    def _settle(self, response: Response) -> list[AgentEvent]:
        self._result, self._pending = response, None
        events = self._close_inference()
        if response.usage:
            self._usage = Usage(
                input_tokens=self._usage.input_tokens + response.usage.input_tokens,
                output_tokens=self._usage.output_tokens + response.usage.output_tokens,
            )
        if response.status in ("failed", "cancelled"):
            code, message = (response.error.code, response.error.message) if response.error else (response.status, "")
            failed = TurnFailed(turn_id=self.turn_id, code=code, message=message)
            return [*events, *self._fail(failed, response.id)]
        calls = [_call(i.call_id, i.name, i.arguments) for i in response.output if isinstance(i, FunctionCallItem)]
        approvals = [_approval(i) for i in response.output if isinstance(i, McpApprovalRequestItem)]
        if calls or approvals:
            self._pending = Pending(tool_calls=calls, approvals=approvals)
            awaiting = TurnAwaitingInput(turn_id=self.turn_id, tool_calls=calls, approval_requests=approvals)
            if calls:
                events.append(self._started(self._client_step_id(), "tool_execution", server_side=False))
            return [*events, awaiting]
        self._completed = True
        text = "".join(_message_text(i) for i in response.output if isinstance(i, MessageItem))
        completed = TurnCompleted(
            turn_id=self.turn_id, output_text=text, step_count=len(self._steps), usage=self._usage, result=response
        )
        return [*events, completed]

    def _ensure_open(self, item: MessageItem | FunctionCallItem) -> _OpenInference:
        if self._open is None:
            self._item_added(item)
        assert self._open is not None
        return self._open

    def _close_inference(self) -> list[AgentEvent]:
        if self._open is None:
            return []
        opened, self._open = self._open, None
        message = CompletionMessage(content="".join(opened.text), tool_calls=opened.calls)
        step = InferenceStep(
            turn_id=self.turn_id, step_id=opened.step_id, started_at=opened.started_at, completed_at=_now(),
            model_response=message,
        )  # fmt: skip
        self._steps.append(step)
        return [self._step_completed(step)]

    def _progress(self, item_id: str, delta: StepDelta) -> list[AgentEvent]:
        step_id, step_type = (self._open.step_id, "inference") if self._open else (item_id, "tool_execution")
        return [StepProgress(turn_id=self.turn_id, step_id=step_id, step_type=step_type, delta=delta)]

    def _started(self, step_id: str, step_type: Any, server_side: bool) -> StepStarted:
        metadata = StepMetadata(server_side=server_side)
        return StepStarted(turn_id=self.turn_id, step_id=step_id, step_type=step_type, metadata=metadata)

    def _step_completed(self, step: InferenceStep | ToolExecutionStep) -> StepCompleted:
        return StepCompleted(turn_id=self.turn_id, step_id=step.step_id, step_type=step.step_type, step=step)


class _OpenInference:
    """The inference step whose output items are still arriving."""

    def __init__(self, step_id: str) -> None:
        self.step_id, self.started_at = step_id, _now()
        self.text: list[str] = []
        self.calls: list[ToolCall] = []


def _now() -> datetime:
    return datetime.now(UTC)


def _item_id(item: _HostedItem) -> str:
    return item.id or f"{item.type}_{id(item)}"


def _call(call_id: str, name: str, arguments: str) -> ToolCall:
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        parsed = None
    return ToolCall(
        call_id=call_id,
        tool_name=name,
        arguments=parsed if isinstance(parsed, dict) else arguments,
        arguments_json=arguments,
    )


def _approval(item: McpApprovalRequestItem) -> ApprovalRequest:
    call = _call(item.id or "", item.name, item.arguments)
    # The Responses API binds a decision to the request's id, not to a digest of its arguments.
    return ApprovalRequest(call_id=call.call_id, tool_name=call.tool_name, arguments=call.arguments, digest="")


def _hosted_call(item: _HostedItem) -> tuple[ToolCall, ToolResponse]:
    """A hosted tool call as the call the model made and what it returned."""
    call_id = _item_id(item)
    if isinstance(item, McpCallItem):
        call, output = _call(call_id, item.name, item.arguments), item.output or json.dumps(item.error or {})
    elif isinstance(item, FileSearchCallItem):
        call = _call(call_id, "file_search", json.dumps({"queries": item.queries}))
        output = json.dumps([r.model_dump(mode="json") for r in item.results or []])
    elif isinstance(item, CodeInterpreterCallItem):
        call = _call(call_id, "code_interpreter", json.dumps({"code": item.code or ""}))
        output = "".join(o.logs for o in item.outputs or [] if o.type == "logs")
    else:
        call = _call(call_id, "web_search", json.dumps({"query": item.action.query}))
        output = json.dumps(item.action.sources or [])
    return call, ToolResponse(call_id=call_id, tool_name=call.tool_name, content=output)


def _message_text(item: MessageItem) -> str:
    if isinstance(item.content, str):
        return item.content
    return "".join(part.text for part in item.content if isinstance(part, OutputText))
