"""Translation between OpenAI items and our messages, and item ids."""

from __future__ import annotations

import json
import uuid
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
    ToolResponseMessage,
    UserMessage,
)
from ferryman.api.responses import (
    FileSearchCallItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputImage,
    InputText,
    Item,
    MessageItem,
    OutputText,
)
from ferryman.errors import InvalidRequestError
from ferryman.inference.openai_wire import parse_arguments
from ferryman.knowledge.results import SearchResult
from ferryman.tools.file_search import TOOL_NAME, render

_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "file_search_call": "fs",
    "mcp_approval_request": "mcpr",
    "mcp_approval_response": "mcpa",
    "mcp_list_tools": "mcpl",
    "mcp_call": "mcp",
    "code_interpreter_call": "ci",
    "web_search_call": "ws",
}


def new_item_id(kind: str) -> str:
    """An OpenAI-style id: ``msg_…``, ``fc_…``, ``fco_…``, ``fs_…``."""
    return f"{_PREFIX[kind]}_{uuid.uuid4().hex}"


def with_ids(items: list[Item]) -> list[Item]:
    """The items as stored: each with an id (kept when the client gave one), message text as parts.

    Raises:
        InvalidRequestError: two items share an id.
    """
    stored = [_as_parts(item if item.id else item.model_copy(update={"id": new_item_id(item.type)})) for item in items]
    ids = [item.id for item in stored]
    if len(set(ids)) != len(ids):
        raise InvalidRequestError("two items share an id", "input")
    return stored


def _as_parts(item: Item) -> Item:
    """OpenAI returns message content as parts even when it was sent as a string."""
    if not isinstance(item, MessageItem) or not isinstance(item.content, str):
        return item
    part = OutputText(text=item.content) if item.role == "assistant" else InputText(text=item.content)
    return item.model_copy(update={"content": [part]})


def input_items(value: str | list[Item]) -> list[Item]:
    """The ``input`` parameter as items: a string is one user message."""
    if isinstance(value, str):
        return [MessageItem(role="user", content=value)] if value else []
    return list(value)


def _text_of(content: str | list[InputText | InputImage | OutputText]) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content if isinstance(part, InputText | OutputText))


def _user_content(content: str | list[InputText | InputImage | OutputText]) -> str | list[ContentItem]:
    if isinstance(content, str):
        return content
    parts: list[ContentItem] = []
    for part in content:
        if isinstance(part, InputImage) and part.image_url:
            parts.append(ImageContentItem(image=ImageSource(url=URL(uri=part.image_url))))
        elif isinstance(part, InputText | OutputText):
            parts.append(TextContentItem(text=part.text))
    return parts


def _message(item: MessageItem) -> Message:
    if item.role == "user":
        return UserMessage(content=_user_content(item.content))
    if item.role == "assistant":
        return CompletionMessage(content=_text_of(item.content), stop_reason="end_of_turn", tool_calls=[])
    return SystemMessage(content=_text_of(item.content))


def items_to_messages(items: list[Item]) -> list[Message]:
    """Our messages for a run of items; consecutive calls join one assistant message, as models expect.

    A ``file_search_call`` item becomes the model's call of the ``file_search`` tool
    and the tool's output: its passages as the model read them when the item kept
    them (``include`` asked for them), else what was searched for, so that a later
    turn knows the search ran and can search again.
    """
    messages: list[Message] = []
    for item in items:
        if isinstance(item, MessageItem):
            messages.append(_message(item))
        elif isinstance(item, FunctionCallOutputItem):
            messages.append(ToolResponseMessage(call_id=item.call_id, content=item.output))
        elif isinstance(item, FunctionCallItem):
            _append_call(messages, _function_call(item))
        elif isinstance(item, FileSearchCallItem):
            _append_search(messages, item)
    return messages


def _function_call(item: FunctionCallItem) -> ToolCall:
    return ToolCall(
        call_id=item.call_id,
        tool_name=item.name,
        arguments=parse_arguments(item.arguments),
        arguments_json=item.arguments or "{}",
    )


def _append_search(messages: list[Message], item: FileSearchCallItem) -> None:
    query = " ".join(item.queries)
    arguments: dict[str, Any] = {"query": query}
    call_id = item.id or new_item_id("file_search_call")
    _append_call(
        messages,
        ToolCall(call_id=call_id, tool_name=TOOL_NAME, arguments=arguments, arguments_json=json.dumps(arguments)),
    )
    messages.append(ToolResponseMessage(call_id=call_id, content=_search_output(query, item)))


def _search_output(query: str, item: FileSearchCallItem) -> str:
    """What the model read of a search: the passages as ``file_search`` renders them, when the item kept them."""
    if item.results is not None:
        found = [SearchResult("", r.file_id, r.filename, "", r.text, r.score, dict(r.attributes)) for r in item.results]
        return render(query, found)
    if item.status != "completed":
        return f"file_search for {query!r} ended {item.status}: it found nothing to answer from."
    return f"file_search ran for {query!r}; its passages were not kept. Search again to read them."


def _append_call(messages: list[Message], call: ToolCall) -> None:
    last = messages[-1] if messages else None
    if isinstance(last, CompletionMessage):
        calls = [*(last.tool_calls or []), call]
        messages[-1] = last.model_copy(update={"tool_calls": calls, "stop_reason": "end_of_message"})
    else:
        messages.append(CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[call]))


def message_item(text: str, item_id: str | None = None, annotations: list[dict[str, Any]] | None = None) -> MessageItem:
    """A completed assistant message item."""
    return MessageItem(
        id=item_id or new_item_id("message"),
        role="assistant",
        content=[OutputText(text=text, annotations=annotations or [])],
        status="completed",
    )


def call_item(call: ToolCall, item_id: str | None = None) -> FunctionCallItem:
    """A completed function-call item."""
    return FunctionCallItem(
        id=item_id or new_item_id("function_call"),
        call_id=call.call_id,
        name=call.tool_name,
        arguments=call.arguments_json or "{}",
        status="completed",
    )
