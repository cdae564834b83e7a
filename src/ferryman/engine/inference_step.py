"""One inference step: stream the model's answer as events and assemble the message."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from ferryman.api.content import CompletionMessage, StopReason, ToolCall
from ferryman.ids import new_id
from ferryman.inference.base import ChatChunk, ChatRequest, FinishChunk, TextChunk, ToolCallChunk, Usage
from ferryman.inference.context import ContextModel
from ferryman.inference.openai_wire import parse_arguments

from .events import Emit, TextDelta, ToolCallArgumentsDelta, ToolCallDone, ToolCallStarted


class ChatModel(Protocol):
    """What the engine needs of inference: a stream of chunks for a request."""

    def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """Stream an answer."""
        ...


class TurnModel(ChatModel, ContextModel, Protocol):
    """What a turn needs of inference: answers, and the context size each prompt must fit (the model router)."""


@dataclass
class _PartialCall:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def finish(self) -> tuple[ToolCall, bool]:
        text = "".join(self.arguments)
        arguments = parse_arguments(text)
        call = ToolCall(
            call_id=self.call_id,
            tool_name=self.name,
            arguments=arguments,
            arguments_json=text or "{}",
        )
        return call, isinstance(arguments, dict)


@dataclass(frozen=True)
class InferenceResult:
    """The assembled assistant message and usage of one step."""

    message: CompletionMessage
    usage: Usage | None


async def run_inference(model: ChatModel, request: ChatRequest, step_id: str, emit: Emit) -> InferenceResult:
    """Stream one model answer, emitting text and tool-call deltas as they arrive."""
    text: list[str] = []
    calls: dict[int, _PartialCall] = {}
    stop_reason: StopReason = "end_of_turn"
    usage: Usage | None = None
    async for chunk in model.stream_chat(request):
        if isinstance(chunk, TextChunk):
            text.append(chunk.text)
            await emit(TextDelta(step_id, chunk.text))
        elif isinstance(chunk, ToolCallChunk):
            await _on_tool_chunk(calls, chunk, step_id, emit)
        elif isinstance(chunk, FinishChunk):
            stop_reason, usage = chunk.stop_reason, chunk.usage
    tool_calls: list[ToolCall] = []
    for index in sorted(calls):
        call, parsed = calls[index].finish()
        tool_calls.append(call)
        await emit(ToolCallDone(step_id, index, call, parsed))
    if tool_calls and stop_reason == "end_of_turn":
        stop_reason = "end_of_message"
    message = CompletionMessage(content="".join(text), stop_reason=stop_reason, tool_calls=tool_calls)
    return InferenceResult(message, usage)


async def _on_tool_chunk(calls: dict[int, _PartialCall], chunk: ToolCallChunk, step_id: str, emit: Emit) -> None:
    partial = calls.get(chunk.index)
    if partial is None:
        # Providers name the call in its first chunk; its id is fixed now, so every event of the call carries it.
        partial = calls[chunk.index] = _PartialCall(chunk.call_id or new_id("call"), chunk.name or "")
        await emit(ToolCallStarted(step_id, chunk.index, partial.call_id, partial.name))
    elif chunk.name:
        partial.name += chunk.name
    if chunk.arguments:
        partial.arguments.append(chunk.arguments)
        await emit(ToolCallArgumentsDelta(step_id, chunk.index, partial.call_id, chunk.arguments))
