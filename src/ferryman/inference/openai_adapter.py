"""Serving OpenAI chat-completion requests from any provider of ours.

Remote OpenAI-compatible providers pass such requests through untouched;
other providers (the embedded model, the scripted one) answer through this
adapter, which turns the request into a :class:`ChatRequest` and our chunks
back into OpenAI completion objects.
"""

from __future__ import annotations

import time
import uuid
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

from .base import ChatChunk, ChatRequest, FinishChunk, Sampling, TextChunk, ToolCallChunk, Usage
from .openai_wire import parse_arguments

_FINISH = {"end_of_turn": "stop", "end_of_message": "tool_calls", "out_of_tokens": "length"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _user_content(content: Any) -> str | list[ContentItem]:
    if isinstance(content, str):
        return content
    items: list[ContentItem] = []
    for part in content or []:
        if part.get("type") == "text":
            items.append(TextContentItem(text=part.get("text", "")))
        elif part.get("type") == "image_url":
            items.append(ImageContentItem(image=ImageSource(url=URL(uri=part["image_url"]["url"]))))
    return items


def message_from_param(param: dict[str, Any]) -> Message:
    """One of our messages from an OpenAI chat message."""
    role = param.get("role")
    if role in ("system", "developer"):
        return SystemMessage(content=_text(param.get("content")))
    if role == "user":
        return UserMessage(content=_user_content(param.get("content")))
    if role == "tool":
        return ToolResponseMessage(call_id=str(param.get("tool_call_id", "")), content=_text(param.get("content")))
    if role == "assistant":
        calls = [
            ToolCall(
                call_id=call["id"],
                tool_name=call["function"]["name"],
                arguments=parse_arguments(call["function"].get("arguments") or ""),
                arguments_json=call["function"].get("arguments") or "{}",
            )
            for call in param.get("tool_calls") or []
        ]
        stop = "end_of_message" if calls else "end_of_turn"
        return CompletionMessage(content=_text(param.get("content")), stop_reason=stop, tool_calls=calls)
    raise InvalidRequestError(f"unsupported message role {role!r}", "messages")


def _tool_def(tool: dict[str, Any]) -> ToolDef:
    function = tool.get("function") or {}
    return ToolDef(
        name=function.get("name", ""),
        description=function.get("description"),
        input_schema=function.get("parameters") or {"type": "object", "properties": {}},
    )


def _tool_choice(choice: Any) -> str | None:
    if isinstance(choice, dict):
        return str((choice.get("function") or {}).get("name")) or None
    return choice if isinstance(choice, str) else None


def _response_format(fmt: Any) -> JsonSchemaResponseFormat | None:
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        return JsonSchemaResponseFormat(json_schema=(fmt.get("json_schema") or {}).get("schema") or {})
    if fmt.get("type") == "json_object":
        return JsonSchemaResponseFormat(json_schema={"type": "object"})
    return None


def chat_request_from_body(body: dict[str, Any], provider_data: dict[str, Any] | None) -> ChatRequest:
    """A :class:`ChatRequest` from an OpenAI chat-completions body."""
    stop = body.get("stop")
    sampling = Sampling(
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        top_k=body.get("top_k"),
        max_tokens=body.get("max_completion_tokens") or body.get("max_tokens"),
        stop=[stop] if isinstance(stop, str) else stop,
    )
    return ChatRequest(
        model=str(body["model"]),
        messages=[message_from_param(m) for m in body.get("messages") or []],
        tools=[_tool_def(t) for t in body.get("tools") or [] if t.get("type") == "function"],
        tool_choice=_tool_choice(body.get("tool_choice")),
        sampling=sampling,
        response_format=_response_format(body.get("response_format")),
        provider_data=provider_data,
    )


class _Envelope:
    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
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
