"""The events of an OpenAI Responses stream, one model per ``type``.

Llama Stack's Responses stream carries the response's id (``response_id``) on
the output-item and content-part events, and its client (llama-stack-client
0.7.5) drops any such event it cannot validate without it; OpenAI's SDK
ignores the extra field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from .responses import Item, OutputText, Refusal, Response


class _Event(BaseModel):
    sequence_number: int


class _ResponseEvent(_Event):
    response: Response


class ResponseCreated(_ResponseEvent):
    """The response was created."""

    type: Literal["response.created"] = "response.created"


class ResponseInProgress(_ResponseEvent):
    """The response runs."""

    type: Literal["response.in_progress"] = "response.in_progress"


class ResponseCompleted(_ResponseEvent):
    """The response finished."""

    type: Literal["response.completed"] = "response.completed"


class ResponseIncomplete(_ResponseEvent):
    """The response stopped before it finished (a limit was reached)."""

    type: Literal["response.incomplete"] = "response.incomplete"


class ResponseFailed(_ResponseEvent):
    """The response failed; ``response.error`` says why."""

    type: Literal["response.failed"] = "response.failed"


class ResponseCancelled(_ResponseEvent):
    """The response was cancelled."""

    type: Literal["response.cancelled"] = "response.cancelled"


class _ItemEvent(_Event):
    response_id: str
    output_index: int
    item: Item


class OutputItemAdded(_ItemEvent):
    """An output item began."""

    type: Literal["response.output_item.added"] = "response.output_item.added"


class OutputItemDone(_ItemEvent):
    """An output item is complete."""

    type: Literal["response.output_item.done"] = "response.output_item.done"


class _PartEvent(_Event):
    response_id: str
    item_id: str
    output_index: int
    content_index: int
    part: OutputText | Refusal


class ContentPartAdded(_PartEvent):
    """A content part of a message began."""

    type: Literal["response.content_part.added"] = "response.content_part.added"


class ContentPartDone(_PartEvent):
    """A content part of a message is complete."""

    type: Literal["response.content_part.done"] = "response.content_part.done"


class _TextEvent(_Event):
    item_id: str
    output_index: int
    content_index: int
    logprobs: list[dict[str, Any]] = Field(default_factory=list)


class OutputTextDelta(_TextEvent):
    """Text the model produced since the last event."""

    type: Literal["response.output_text.delta"] = "response.output_text.delta"
    delta: str


class OutputTextDone(_TextEvent):
    """The whole text of a content part."""

    type: Literal["response.output_text.done"] = "response.output_text.done"
    text: str


class FunctionCallArgumentsDelta(_Event):
    """Argument text of a function call, as the model produced it."""

    type: Literal["response.function_call_arguments.delta"] = "response.function_call_arguments.delta"
    item_id: str
    output_index: int
    delta: str


class FunctionCallArgumentsDone(_Event):
    """The whole arguments of a function call."""

    type: Literal["response.function_call_arguments.done"] = "response.function_call_arguments.done"
    item_id: str
    output_index: int
    arguments: str
    name: str


class OutputTextAnnotationAdded(_Event):
    """An annotation (a file citation) of a content part's text."""

    type: Literal["response.output_text.annotation.added"] = "response.output_text.annotation.added"
    item_id: str
    output_index: int
    content_index: int
    annotation_index: int
    annotation: dict[str, Any]


class CallEvent(_Event):
    """An event about one output item of a hosted tool (its progress, its arguments or code)."""

    item_id: str
    output_index: int


class FileSearchCallInProgress(CallEvent):
    """A file search call began."""

    type: Literal["response.file_search_call.in_progress"] = "response.file_search_call.in_progress"


class FileSearchCallSearching(CallEvent):
    """A file search call is searching."""

    type: Literal["response.file_search_call.searching"] = "response.file_search_call.searching"


class FileSearchCallCompleted(CallEvent):
    """A file search call finished searching."""

    type: Literal["response.file_search_call.completed"] = "response.file_search_call.completed"


class McpListToolsInProgress(CallEvent):
    """The server began listing an MCP server's tools."""

    type: Literal["response.mcp_list_tools.in_progress"] = "response.mcp_list_tools.in_progress"


class McpListToolsCompleted(CallEvent):
    """An MCP server's tools are listed."""

    type: Literal["response.mcp_list_tools.completed"] = "response.mcp_list_tools.completed"


class McpListToolsFailed(CallEvent):
    """An MCP server's tools could not be listed."""

    type: Literal["response.mcp_list_tools.failed"] = "response.mcp_list_tools.failed"


class McpCallArgumentsDelta(CallEvent):
    """Argument text of an MCP call."""

    type: Literal["response.mcp_call_arguments.delta"] = "response.mcp_call_arguments.delta"
    delta: str


class McpCallArgumentsDone(CallEvent):
    """The whole arguments of an MCP call."""

    type: Literal["response.mcp_call_arguments.done"] = "response.mcp_call_arguments.done"
    arguments: str


class McpCallInProgress(CallEvent):
    """An MCP call is running."""

    type: Literal["response.mcp_call.in_progress"] = "response.mcp_call.in_progress"


class McpCallCompleted(CallEvent):
    """An MCP call returned."""

    type: Literal["response.mcp_call.completed"] = "response.mcp_call.completed"


class McpCallFailed(CallEvent):
    """An MCP call failed."""

    type: Literal["response.mcp_call.failed"] = "response.mcp_call.failed"


class CodeInterpreterCallInProgress(CallEvent):
    """A code interpreter call began."""

    type: Literal["response.code_interpreter_call.in_progress"] = "response.code_interpreter_call.in_progress"


class CodeInterpreterCallCodeDelta(CallEvent):
    """Code of a code interpreter call."""

    type: Literal["response.code_interpreter_call_code.delta"] = "response.code_interpreter_call_code.delta"
    delta: str


class CodeInterpreterCallCodeDone(CallEvent):
    """The whole code of a code interpreter call."""

    type: Literal["response.code_interpreter_call_code.done"] = "response.code_interpreter_call_code.done"
    code: str


class CodeInterpreterCallInterpreting(CallEvent):
    """The code runs."""

    type: Literal["response.code_interpreter_call.interpreting"] = "response.code_interpreter_call.interpreting"


class CodeInterpreterCallCompleted(CallEvent):
    """The code ran."""

    type: Literal["response.code_interpreter_call.completed"] = "response.code_interpreter_call.completed"


class WebSearchCallInProgress(CallEvent):
    """A web search call began."""

    type: Literal["response.web_search_call.in_progress"] = "response.web_search_call.in_progress"


class WebSearchCallSearching(CallEvent):
    """A web search call is searching."""

    type: Literal["response.web_search_call.searching"] = "response.web_search_call.searching"


class WebSearchCallCompleted(CallEvent):
    """A web search call finished."""

    type: Literal["response.web_search_call.completed"] = "response.web_search_call.completed"


class RefusalDone(_Event):
    """The whole refusal of a content part (a guardrail blocked the response)."""

    type: Literal["response.refusal.done"] = "response.refusal.done"
    item_id: str
    output_index: int
    content_index: int
    refusal: str


ResponseStreamEvent = Annotated[
    ResponseCreated
    | ResponseInProgress
    | ResponseCompleted
    | ResponseIncomplete
    | ResponseFailed
    | ResponseCancelled
    | OutputItemAdded
    | OutputItemDone
    | ContentPartAdded
    | ContentPartDone
    | OutputTextDelta
    | OutputTextDone
    | RefusalDone
    | FunctionCallArgumentsDelta
    | FunctionCallArgumentsDone
    | OutputTextAnnotationAdded
    | FileSearchCallInProgress
    | FileSearchCallSearching
    | FileSearchCallCompleted
    | McpListToolsInProgress
    | McpListToolsCompleted
    | McpListToolsFailed
    | McpCallArgumentsDelta
    | McpCallArgumentsDone
    | McpCallInProgress
    | McpCallCompleted
    | McpCallFailed
    | CodeInterpreterCallInProgress
    | CodeInterpreterCallCodeDelta
    | CodeInterpreterCallCodeDone
    | CodeInterpreterCallInterpreting
    | CodeInterpreterCallCompleted
    | WebSearchCallInProgress
    | WebSearchCallSearching
    | WebSearchCallCompleted,
    Field(discriminator="type"),
]
"""One event of a response stream (the JSON ``data`` of one SSE event, whose ``event`` is its ``type``)."""
