"""Engine events as an OpenAI Responses stream: typed events, numbered, each serialised once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from ferryman.api.agents import InferenceStep, ShieldCallStep, ToolExecutionStep
from ferryman.api.content import CompletionMessage, ToolCall, ToolResponse, content_to_text
from ferryman.api.response_events import (
    CallEvent,
    ContentPartAdded,
    ContentPartDone,
    FunctionCallArgumentsDelta,
    FunctionCallArgumentsDone,
    OutputItemAdded,
    OutputItemDone,
    OutputTextAnnotationAdded,
    OutputTextDone,
    ResponseCancelled,
    ResponseCompleted,
    ResponseCreated,
    ResponseFailed,
    ResponseIncomplete,
    ResponseInProgress,
    ResponseStreamEvent,
)
from ferryman.api.responses import (
    CompactionItem,
    FunctionCallItem,
    HostedCallItem,
    Item,
    McpCallItem,
    MessageItem,
    OutputText,
    Response,
    ResponseError,
    Usage,
)
from ferryman.engine.events import (
    EngineEvent,
    HistoryCompacted,
    StepCompleted,
    StepStarted,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallDone,
    ToolCallStarted,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from ferryman.engine.unlisted import UNLISTED_METADATA
from ferryman.errors import FailureCode

from .approvals import approval_item
from .citations import Sources
from .compaction import HistoryItems
from .guardrails import Verdicts, refusal_events
from .hosted.base import Announced, CallRenderer, Progress
from .ids import new_item_id
from .items import call_item, message_item


@dataclass
class _OpenText:
    output_index: int
    item_id: str
    parts: list[str]


@dataclass(frozen=True)
class _OpenCall:
    output_index: int
    item_id: str


@dataclass
class _Hosted:
    """The response's calls of hosted tools: made by the model, running, and what their searches found."""

    renderers: dict[str, CallRenderer]
    announced: list[Announced]
    called: list[ToolCall] = field(default_factory=list)
    running: dict[str, tuple[_OpenCall, CallRenderer]] = field(default_factory=dict)
    sources: Sources = field(default_factory=Sources)


class ResponseEncoder:
    """Builds a response from engine events, and encodes them as the response's stream events.

    A call of a hosted tool (``file_search``, ``mcp``, ``code_interpreter``,
    ``web_search``) becomes the item its tool's renderer makes (see
    ``hosted/base.py``), opened when the engine starts running the step's tools
    and closed when that step completes; the answer after a search is annotated
    with citations of what it found (see :meth:`Sources.citations`). Items made
    before the turn ran (an MCP server's tool listing) open the output. A compaction of the history becomes a
    ``compaction`` item, done at once.

    Args:
        response: The response as created (status ``in_progress`` or ``queued``); kept up to date.
        client_tools: Names of the function tools, whose calls become output items.
        renderers: The renderer of each hosted tool's calls, by the name the model calls it.
        announced: Items made before the turn, shown first.
        held: Hosted tools whose calls wait for approval, with the ``server_label`` of their requests.
        approved: Calls an earlier response held that this one runs first (see ``approvals.py``).
        compaction: Makes the ``compaction`` item of a compacted history (None: the response compacts nothing).
    """

    def __init__(
        self,
        response: Response,
        client_tools: set[str],
        renderers: dict[str, CallRenderer] | None = None,
        announced: list[Announced] | None = None,
        held: dict[str, str | None] | None = None,
        approved: list[ToolCall] | None = None,
        compaction: HistoryItems | None = None,
    ) -> None:
        self.response, self._compaction = response, compaction
        self._client_tools = client_tools
        self._hosted = _Hosted(renderers or {}, announced or [], called=list(approved or []))
        self._held = held or {}
        self._approved = {call.call_id for call in approved or []}
        self._started = False
        self._verdicts = Verdicts()
        self._text: _OpenText | None = None
        self._calls: dict[str, _OpenCall] = {}
        self._seq = 0
        self._out: list[str] = []

    def encode(self, event: EngineEvent, seq: int) -> list[str]:
        """The stream events (JSON) one engine event becomes, numbered from ``seq``."""
        self._seq, self._out = seq, []
        # A new kind of engine event gets its Responses form here (most need none).
        match event:
            case TextDelta(text=text):
                self._on_text(text)
            case ToolCallStarted(call_id=call_id, name=name) if name in self._client_tools:
                self._open_call(call_id, name)
            case ToolCallArgumentsDelta(call_id=call_id, delta=delta) if call_id in self._calls:
                self._arguments_delta(self._calls[call_id], delta)
            case ToolCallDone(call=call) if call.tool_name in self._hosted.renderers:
                self._hosted.called.append(call)
            case ToolCallDone(call=call):
                self._close_call(call)
            case HistoryCompacted(history=history) if self._compaction is not None:
                if (item := self._compaction(history)) is not None:
                    self._add_done(item)
            case StepCompleted(step=InferenceStep() as step):
                self._inference_done(step)
            case StepStarted(step_type="tool_execution", metadata=metadata) if UNLISTED_METADATA in metadata:
                pass  # the failed mcp_list_tools items, shown first, say what the step records
            case StepStarted(step_type="tool_execution", metadata=metadata):
                self._request_approvals(metadata.get("approval_call_ids") or [])
                self._open_hosted()
            case StepStarted(step_type="shield_call", step_id=step_id, metadata=metadata):
                self._verdicts.started(step_id, metadata.get("phase"))
            case StepCompleted(step=ShieldCallStep() as step):
                self._verdicts.completed(step)
            case StepCompleted(step=ToolExecutionStep() as step):
                self._close_hosted(step.tool_responses)
            case TurnStarted() if not self._started:
                self._start()
            case TurnCompleted(turn=turn):
                self._finish(turn.output_message)
            case TurnFailed(code=code, message=message):
                self._fail(code, message)
        return self._out

    def fail_abandoned(self, seq: int, message: str) -> list[str]:
        """The event that ends the stream a dead replica left after its event ``seq - 1``."""
        self._seq, self._out = seq, []
        self._fail(FailureCode.INTERRUPTED, message)
        return self._out

    def _emit(self, event: ResponseStreamEvent) -> None:
        self._emit_data(event.model_dump_json())

    def _emit_data(self, data: str) -> None:
        self._out.append(data)
        self._seq += 1

    def _start(self) -> None:
        self._started = True
        self._emit(ResponseCreated(sequence_number=self._seq, response=self.response))
        self.response.status = "in_progress"
        self._emit(ResponseInProgress(sequence_number=self._seq, response=self.response))
        for announced in self._hosted.announced:
            opened = _OpenCall(len(self.response.output), announced.item.id or "")
            self.response.output.append(announced.item)
            self._item_added(opened, announced.item)
            self._progress(opened, announced.progress)
            self._item_done(opened, announced.item)
        self._hosted.announced = []

    def _on_text(self, delta: str) -> None:
        opened = self._text
        if opened is None:
            opened = self._text = _OpenText(len(self.response.output), new_item_id("message"), [])
            item = MessageItem(id=opened.item_id, role="assistant", content=[], status="in_progress")
            self.response.output.append(item)
            self._emit(
                OutputItemAdded(
                    sequence_number=self._seq, output_index=opened.output_index, response_id=self.response.id, item=item
                )
            )
            self._emit(
                ContentPartAdded(
                    sequence_number=self._seq,
                    output_index=opened.output_index,
                    response_id=self.response.id,
                    item_id=opened.item_id,
                    content_index=0,
                    part=OutputText(text=""),
                )
            )
        opened.parts.append(delta)
        # A stream's most frequent event, written without its model: the bytes ``OutputTextDelta`` dumps.
        self._emit_data(orjson.dumps(_text_delta(self._seq, opened, delta)).decode())

    def _close_text(self) -> None:
        opened, self._text = self._text, None
        if opened is None:
            return
        text, item_id = "".join(opened.parts), opened.item_id
        annotations = self._hosted.sources.citations(text)
        for number, annotation in enumerate(annotations):
            self._emit(
                OutputTextAnnotationAdded(
                    sequence_number=self._seq,
                    output_index=opened.output_index,
                    item_id=item_id,
                    content_index=0,
                    annotation_index=number,
                    annotation=annotation,
                )
            )
        self._emit(
            OutputTextDone(
                sequence_number=self._seq, output_index=opened.output_index, item_id=item_id, content_index=0, text=text
            )
        )
        self._emit(
            ContentPartDone(
                sequence_number=self._seq,
                output_index=opened.output_index,
                response_id=self.response.id,
                item_id=item_id,
                content_index=0,
                part=OutputText(text=text, annotations=annotations),
            )
        )
        item = message_item(text, item_id, annotations)
        self.response.output[opened.output_index] = item
        self._emit(
            OutputItemDone(
                sequence_number=self._seq, output_index=opened.output_index, response_id=self.response.id, item=item
            )
        )

    def _open_call(self, call_id: str, name: str) -> None:
        self._close_text()
        opened = self._calls[call_id] = _OpenCall(len(self.response.output), new_item_id("function_call"))
        item = FunctionCallItem(id=opened.item_id, call_id=call_id, name=name, arguments="", status="in_progress")
        self.response.output.append(item)
        self._item_added(opened, item)

    def _close_call(self, call: ToolCall) -> None:
        opened = self._calls.pop(call.call_id, None)
        if opened is None:
            if call.tool_name not in self._client_tools:
                return
            # Named only after its first chunk: the call streams at once, its arguments as one delta.
            self._open_call(call.call_id, call.tool_name)
            opened = self._calls.pop(call.call_id)
            self._arguments_delta(opened, call.arguments_json or "{}")
        item = call_item(call, opened.item_id)
        self.response.output[opened.output_index] = item
        done = FunctionCallArgumentsDone(
            sequence_number=self._seq,
            output_index=opened.output_index,
            item_id=opened.item_id,
            arguments=item.arguments,
            name=item.name,
        )
        self._emit(done)
        self._item_done(opened, item)

    def _arguments_delta(self, opened: _OpenCall, delta: str) -> None:
        at = {"output_index": opened.output_index, "item_id": opened.item_id}
        self._emit(FunctionCallArgumentsDelta(sequence_number=self._seq, delta=delta, **at))

    def _add_done(self, item: Item) -> None:
        """An item complete as it is made: added to the output, and done at once."""
        self._close_text()
        opened = _OpenCall(len(self.response.output), item.id or "")
        self.response.output.append(item)
        self._item_added(opened, item)
        self._item_done(opened, item)

    def _item_added(self, opened: _OpenCall, item: Item) -> None:
        at = {"output_index": opened.output_index, "response_id": self.response.id}
        self._emit(OutputItemAdded(sequence_number=self._seq, item=item, **at))

    def _item_done(self, opened: _OpenCall, item: Item) -> None:
        at = {"output_index": opened.output_index, "response_id": self.response.id}
        self._emit(OutputItemDone(sequence_number=self._seq, item=item, **at))

    def _progress(self, opened: _OpenCall, progress: list[Progress]) -> None:
        for kind, fields in progress:
            event: CallEvent = kind(
                sequence_number=self._seq, output_index=opened.output_index, item_id=opened.item_id, **fields
            )
            self._emit(event)  # type: ignore[arg-type]  # every CallEvent subclass is a ResponseStreamEvent

    def _open_hosted(self) -> None:
        """The model's hosted tool calls start running: each becomes its renderer's item, in progress."""
        self._close_text()
        for call in self._hosted.called:
            renderer = self._hosted.renderers[call.tool_name]
            opened = _OpenCall(len(self.response.output), new_item_id(renderer.item_type))
            item, progress = renderer.started(call, opened.item_id)
            if isinstance(item, McpCallItem) and call.call_id in self._approved:
                item.approval_request_id = call.call_id  # an approved call runs under its request's id
            self._hosted.running[call.call_id] = (opened, renderer)
            self.response.output.append(item)
            self._item_added(opened, item)
            self._progress(opened, progress)
        self._hosted.called = []

    def _request_approvals(self, call_ids: list[str]) -> None:
        """Held calls do not run: each becomes an ``mcp_approval_request`` item, answered by a later response."""
        if not call_ids:
            return
        self._close_text()
        held = [call for call in self._hosted.called if call.call_id in call_ids]
        self._hosted.called = [call for call in self._hosted.called if call.call_id not in call_ids]
        for call in held:
            self._add_done(approval_item(call, self._held.get(call.tool_name)))

    def _close_hosted(self, responses: list[ToolResponse]) -> None:
        """The calls ran: each item gets its outcome from the tool's response."""
        for response in responses:
            running = self._hosted.running.pop(response.call_id, None)
            if running is None:
                continue
            opened, renderer = running
            started = self.response.output[opened.output_index]
            assert isinstance(started, HostedCallItem)
            item, progress = renderer.finished(started, response, self._hosted.sources)
            self.response.output[opened.output_index] = item
            self._progress(opened, progress)
            self._item_done(opened, item)

    def _inference_done(self, step: InferenceStep) -> None:
        self._close_text()
        if step.usage is not None:
            usage = self.response.usage or Usage()
            usage.input_tokens += step.usage.input_tokens
            usage.output_tokens += step.usage.output_tokens
            usage.total_tokens = usage.input_tokens + usage.output_tokens
            self.response.usage = usage

    def _finish(self, message: CompletionMessage) -> None:
        self._close_text()
        if message.stop_reason == "out_of_tokens":
            reason = "max_iterations" if message.tool_calls else "max_output_tokens"
            self.response.status, self.response.incomplete_details = "incomplete", {"reason": reason}
            self._emit(ResponseIncomplete(sequence_number=self._seq, response=self.response))
            return
        text = content_to_text(message.content)
        if self._verdicts.refused:
            for event in refusal_events(self.response.id, len(self.response.output), text, self._seq):
                self._emit(event)
                if isinstance(event, OutputItemDone):
                    self.response.output.append(event.item)
        elif text and all(isinstance(item, CompactionItem) for item in self.response.output):
            self.response.output.append(message_item(text))
        self.response.status = "completed"
        self._emit(ResponseCompleted(sequence_number=self._seq, response=self.response))

    def _fail(self, code: FailureCode, message: str) -> None:
        self._close_text()
        for opened, _ in self._hosted.running.values():
            item = self.response.output[opened.output_index]
            self.response.output[opened.output_index] = item.model_copy(update={"status": "failed"})
        self.response.error = ResponseError(code=code, message=message)
        if code == FailureCode.CANCELLED:
            self.response.status = "cancelled"
            self._emit(ResponseCancelled(sequence_number=self._seq, response=self.response))
        else:
            self.response.status = "failed"
            self._emit(ResponseFailed(sequence_number=self._seq, response=self.response))


def _text_delta(seq: int, opened: _OpenText, delta: str) -> dict[str, Any]:
    """An ``OutputTextDelta`` of the open text as its model dumps it, its fields in the model's order."""
    return {
        "sequence_number": seq,
        "item_id": opened.item_id,
        "output_index": opened.output_index,
        "content_index": 0,
        "logprobs": [],
        "type": "response.output_text.delta",
        "delta": delta,
    }
