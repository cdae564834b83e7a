"""Serving OpenAI chat-completion requests from any provider of ours.

Remote OpenAI-compatible providers pass such requests through untouched;
other providers (the embedded model, the scripted one) answer through this
adapter, which turns the request into a :class:`ChatRequest` and our chunks
back into OpenAI completion objects.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from ferryman.api.content import (
    URL,
    CompletionMessage,
    ContentItem,
    ImageContentItem,
    ImageSource,
    Message,
    SystemMessage,
    TextContentItem,
    ToolCall,
    ToolDef,
    ToolResponseMessage,
    UserMessage,
)
from ferryman.api.inference import JsonSchemaResponseFormat
from ferryman.errors import InvalidRequestError
from ferryman.ids import new_hex

from .base import ChatChunk, ChatRequest, FinishChunk, Sampling, TextChunk, ToolCallChunk, Usage
from .openai_params import (
    AssistantParam,
    Content,
    FormatParam,
    FunctionToolParam,
    ImagePart,
    JsonObjectFormatParam,
    JsonSchemaFormatParam,
    MessageParam,
    NamedToolChoiceParam,
    SystemParam,
    TextPart,
    ToolParam,
    UserParam,
    content_text,
    parse_chat_params,
)
from .openai_wire import parse_arguments

_FINISH = {"end_of_turn": "stop", "end_of_message": "tool_calls", "out_of_tokens": "length"}


def _user_content(content: Content | None) -> str | list[ContentItem]:
    if isinstance(content, str):
        return content
    items: list[ContentItem] = []
    for part in content or []:
        if isinstance(part, TextPart):
            items.append(TextContentItem(text=part.text))
        elif isinstance(part, ImagePart):
            items.append(ImageContentItem(image=ImageSource(url=URL(uri=part.image_url.url))))
    return items


def message_from_param(param: MessageParam) -> Message:
    """One of our messages from a validated OpenAI chat message (see :func:`parse_chat_params`)."""
    if isinstance(param, SystemParam):
        return SystemMessage(content=content_text(param.content))
    if isinstance(param, UserParam):
        return UserMessage(content=_user_content(param.content))
    if isinstance(param, ToolParam):
        return ToolResponseMessage(call_id=param.tool_call_id, content=content_text(param.content))
    if not isinstance(param, AssistantParam):
        raise InvalidRequestError(f"unsupported message role {param.role!r}", "messages")
    calls = [
        ToolCall(
            call_id=call.id,
            tool_name=call.function.name,
            arguments=parse_arguments(call.function.arguments or ""),
            arguments_json=call.function.arguments or "{}",
        )
        for call in param.tool_calls or []
    ]
    stop = "end_of_message" if calls else "end_of_turn"
    return CompletionMessage(content=content_text(param.content), stop_reason=stop, tool_calls=calls)


def _tool_def(tool: FunctionToolParam) -> ToolDef:
    function = tool.function
    return ToolDef(
        name=function.name,
        description=function.description,
        input_schema=function.parameters or {"type": "object", "properties": {}},
    )


def _tool_choice(choice: str | NamedToolChoiceParam | None) -> str | None:
    if isinstance(choice, NamedToolChoiceParam):
        return choice.function.name or None
    return choice


def _response_format(fmt: FormatParam | None) -> JsonSchemaResponseFormat | None:
    if isinstance(fmt, JsonSchemaFormatParam):
        return JsonSchemaResponseFormat(json_schema=(fmt.json_schema.schema_ if fmt.json_schema else None) or {})
    if isinstance(fmt, JsonObjectFormatParam):
        return JsonSchemaResponseFormat(json_schema={"type": "object"})
    return None


def chat_request_from_body(body: dict[str, Any], provider_data: dict[str, Any] | None) -> ChatRequest:
    """A :class:`ChatRequest` from an OpenAI chat-completions body.

    Raises:
        InvalidRequestError: a field the request is built from has the wrong shape or is over its maximum.
    """
    params = parse_chat_params(body)
    stop = params.stop
    sampling = Sampling(
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k,
        max_tokens=_max_tokens(body),
        stop=[stop] if isinstance(stop, str) else stop,
    )
    return ChatRequest(
        model=str(body["model"]),
        messages=[message_from_param(m) for m in params.messages or []],
        tools=[_tool_def(t) for t in params.tools or [] if isinstance(t, FunctionToolParam)],
        tool_choice=_tool_choice(params.tool_choice),
        sampling=sampling,
        response_format=_response_format(params.response_format),
        provider_data=provider_data,
    )


def _max_tokens(body: dict[str, Any]) -> int | None:
    """The answer's token limit (``max_completion_tokens``, else ``max_tokens``; 0 or null: none)."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidRequestError(f"{name} must be a non-negative integer", name)
        if value:
            return value
    return None


class _Envelope:
    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{new_hex()}"
        self.model = model
        self.created = int(time.time())

    def chunk(self, delta: dict[str, Any], finish: str | None = None, usage: Usage | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            body["usage"] = _usage(usage)
        return body


def _usage(usage: Usage) -> dict[str, int]:
    total = usage.input_tokens + usage.output_tokens
    return {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens, "total_tokens": total}


def _call_delta(chunk: ToolCallChunk) -> dict[str, Any]:
    call: dict[str, Any] = {"index": chunk.index, "function": {"arguments": chunk.arguments}}
    if chunk.call_id:
        call["id"], call["type"] = chunk.call_id, "function"
    if chunk.name:
        call["function"]["name"] = chunk.name
    return {"tool_calls": [call]}


async def completion_chunks(chunks: AsyncIterator[ChatChunk], model: str) -> AsyncIterator[dict[str, Any]]:
    """OpenAI ``chat.completion.chunk`` objects from our chunks."""
    envelope = _Envelope(model)
    yield envelope.chunk({"role": "assistant", "content": ""})
    async for chunk in chunks:
        if isinstance(chunk, TextChunk):
            yield envelope.chunk({"content": chunk.text})
        elif isinstance(chunk, ToolCallChunk):
            yield envelope.chunk(_call_delta(chunk))
        elif isinstance(chunk, FinishChunk):
            yield envelope.chunk({}, _FINISH[chunk.stop_reason], chunk.usage)


async def completion(chunks: AsyncIterator[ChatChunk], model: str) -> dict[str, Any]:
    """One OpenAI ``chat.completion`` object from our chunks."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish, usage = "stop", Usage()
    async for chunk in chunks:
        if isinstance(chunk, TextChunk):
            text.append(chunk.text)
        elif isinstance(chunk, ToolCallChunk):
            call = calls.setdefault(
                chunk.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
            )
            call["id"] = chunk.call_id or call["id"]
            call["function"]["name"] += chunk.name or ""
            call["function"]["arguments"] += chunk.arguments
        elif isinstance(chunk, FinishChunk):
            finish, usage = _FINISH[chunk.stop_reason], chunk.usage or usage
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    envelope = _Envelope(model)
    return {
        "id": envelope.id,
        "object": "chat.completion",
        "created": envelope.created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(usage),
    }
