"""Engine events as an OpenAI Responses stream: typed events, numbered, each serialised once."""

from __future__ import annotations

from dataclasses import dataclass, field

from ferryman.api.agents import InferenceStep, ToolExecutionStep
from ferryman.api.content import CompletionMessage, ToolCall, ToolResponse, content_to_text
from ferryman.api.response_events import (
    ContentPartAdded,
    ContentPartDone,
    FileSearchCallCompleted,
    FileSearchCallInProgress,
    FileSearchCallSearching,
    FunctionCallArgumentsDelta,
    FunctionCallArgumentsDone,
    OutputItemAdded,
    OutputItemDone,
    OutputTextAnnotationAdded,
    OutputTextDelta,
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
    FileSearchCallItem,
    FileSearchResult,
    FunctionCallItem,
    MessageItem,
    OutputText,
    Response,
    ResponseError,
    Usage,
)
from ferryman.engine.events import (
    EngineEvent,
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
from ferryman.errors import FailureCode
from ferryman.tools.file_search import METADATA_KEY, TOOL_NAME

from .citations import Sources
from .items import call_item, message_item, new_item_id


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
class _Searches:
    """The response's file search calls: made by the model, running, and what they found."""

    include_results: bool
    called: list[ToolCall] = field(default_factory=list)
    running: dict[str, _OpenCall] = field(default_factory=dict)
    sources: Sources = field(default_factory=Sources)


class ResponseEncoder:
    """Builds a response from engine events, and encodes them as the response's stream events.

    A call of the server-side ``file_search`` tool becomes a ``file_search_call``
    item, opened when the engine starts running the step's tools and closed when
    that step completes; the answer after it is annotated with file citations
    (see :meth:`Sources.citations`).

    Args:
        response: The response as created (status ``in_progress`` or ``queued``); kept up to date.
        client_tools: Names of the function tools, whose calls become output items.
        file_search: Whether the response offers the ``file_search`` tool.
        include_results: Whether ``file_search_call`` items keep the passages found.
    """

    def __init__(
        self, response: Response, client_tools: set[str], file_search: bool = False, include_results: bool = False
    ) -> None:
        self.response = response
        self._client_tools = client_tools
        self._file_search = file_search
        self._searches = _Searches(include_results)
        self._started = False
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
                opened = self._calls[call_id]
                self._emit(
                    FunctionCallArgumentsDelta(
                        sequence_number=self._seq, output_index=opened.output_index, item_id=opened.item_id, delta=delta
                    )
                )
            case ToolCallDone(call=call) if self._file_search and call.tool_name == TOOL_NAME:
                self._searches.called.append(call)
            case ToolCallDone(call=call):
                self._close_call(call)
            case StepCompleted(step=InferenceStep() as step):
                self._inference_done(step)
            case StepStarted(step_type="tool_execution"):
                self._open_searches()
            case StepCompleted(step=ToolExecutionStep() as step):
                self._close_searches(step.tool_responses)
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
        self._out.append(event.model_dump_json())
        self._seq += 1

    def _start(self) -> None:
        self._started = True
        self._emit(ResponseCreated(sequence_number=self._seq, response=self.response))
        self.response.status = "in_progress"
        self._emit(ResponseInProgress(sequence_number=self._seq, response=self.response))

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
        self._emit(
            OutputTextDelta(
                sequence_number=self._seq,
                output_index=opened.output_index,
                item_id=opened.item_id,
                content_index=0,
                delta=delta,
            )
        )

    def _close_text(self) -> None:
        opened, self._text = self._text, None
        if opened is None:
            return
        text, item_id = "".join(opened.parts), opened.item_id
        annotations = self._searches.sources.citations(text)
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
        self._emit(
            OutputItemAdded(
                sequence_number=self._seq, output_index=opened.output_index, response_id=self.response.id, item=item
            )
        )

    def _close_call(self, call: ToolCall) -> None:
        opened = self._calls.pop(call.call_id, None)
        if opened is None:
            if call.tool_name not in self._client_tools:
                return
            # Named only after its first chunk: the call streams at once, its arguments as one delta.
            self._open_call(call.call_id, call.tool_name)
            opened = self._calls.pop(call.call_id)
            delta = call.arguments_json or "{}"
            self._emit(
                FunctionCallArgumentsDelta(
                    sequence_number=self._seq, output_index=opened.output_index, item_id=opened.item_id, delta=delta
                )
            )
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
        self._emit(
            OutputItemDone(
                sequence_number=self._seq, output_index=opened.output_index, response_id=self.response.id, item=item
            )
        )

    def _open_searches(self) -> None:
        """The model's file search calls start running: each becomes an item that is searching."""
        self._close_text()
        for call in self._searches.called:
            query = call.arguments.get("query") if isinstance(call.arguments, dict) else None
            opened = _OpenCall(len(self.response.output), new_item_id("file_search_call"))
            self._searches.running[call.call_id] = opened
            item = FileSearchCallItem(
                id=opened.item_id, status="in_progress", queries=[query] if isinstance(query, str) else []
            )
            self.response.output.append(item)
            at = {"output_index": opened.output_index, "item_id": opened.item_id}
            self._emit(OutputItemAdded(sequence_number=self._seq, response_id=self.response.id, item=item, **at))
            self._emit(FileSearchCallInProgress(sequence_number=self._seq, **at))
            item.status = "searching"
            self._emit(FileSearchCallSearching(sequence_number=self._seq, **at))
        self._searches.called = []

    def _close_searches(self, responses: list[ToolResponse]) -> None:
        """The searches ran: each item gets its outcome (and its passages, when included)."""
        for response in responses:
            opened = self._searches.running.pop(response.call_id, None)
            if opened is None:
                continue
            metadata = response.metadata or {}
            found = metadata.get(METADATA_KEY)
            results = [FileSearchResult.model_validate(r) for r in found["results"]] if found else []
            item = self.response.output[opened.output_index]
            assert isinstance(item, FileSearchCallItem)
            item.status = "completed" if found else "failed" if metadata.get("error") else "incomplete"
            item.results = results if self._searches.include_results and found else None
            at = {"output_index": opened.output_index, "item_id": opened.item_id}
            if found:
                self._searches.sources.add_search(results)
                self._emit(FileSearchCallCompleted(sequence_number=self._seq, **at))
            self._emit(OutputItemDone(sequence_number=self._seq, response_id=self.response.id, item=item, **at))

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
        if not self.response.output and text:
            self.response.output.append(message_item(text))
        self.response.status = "completed"
        self._emit(ResponseCompleted(sequence_number=self._seq, response=self.response))

    def _fail(self, code: FailureCode, message: str) -> None:
        self._close_text()
        for opened in self._searches.running.values():
            item = self.response.output[opened.output_index]
            if isinstance(item, FileSearchCallItem):
                item.status = "failed"
        self.response.error = ResponseError(code=code, message=message)
        if code == FailureCode.CANCELLED:
            self.response.status = "cancelled"
            self._emit(ResponseCancelled(sequence_number=self._seq, response=self.response))
        else:
            self.response.status = "failed"
            self._emit(ResponseFailed(sequence_number=self._seq, response=self.response))
