"""Translation between OpenAI items and our messages, and item ids."""

from __future__ import annotations

from dataclasses import dataclass
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
    CompactionItem,
    ContentPart,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputImage,
    InputText,
    Item,
    MessageItem,
    OutputText,
    Refusal,
)
from ferryman.errors import InvalidRequestError
from ferryman.inference.openai_wire import parse_arguments

from .hosted.replay import replayed
from .ids import new_item_id


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


def _text_of(content: str | list[ContentPart]) -> str:
    if isinstance(content, str):
        return content
    # A guardrail's refusal stands in the conversation as what the assistant answered.
    return "".join(
        part.refusal if isinstance(part, Refusal) else part.text
        for part in content
        if isinstance(part, InputText | OutputText | Refusal)
    )


def _user_content(content: str | list[ContentPart]) -> str | list[ContentItem]:
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

    A hosted tool's call item (``file_search_call``, ``mcp_call``, ``code_interpreter_call``,
    ``web_search_call``) becomes the model's call of that tool and the output it read, as its
    kind replays it (``hosted/replay.py``), so that a later turn knows what the tool gave.
    Items that were never the model's to read (``mcp_list_tools``, approval items) become nothing. A response's
    ``compaction`` item (opened) becomes the history it holds, and the items before it become nothing: it
    replaced them, all but those its response never read, which follow it (:func:`read_window`).
    """
    return _converted(items).messages


def message_positions(items: list[Item]) -> list[int | None]:
    """For each item, the index of the message of :func:`items_to_messages` that holds what it said.

    None for an item that becomes no message, a ``compaction`` item (see :func:`compaction_spans`), or (a
    hosted tool's call) a replayed call and its output.
    """
    return _converted(items).positions


def compaction_spans(items: list[Item]) -> dict[int, tuple[int, int]]:
    """For each opened ``compaction`` item the model reads (by its index in ``items``), the messages of
    :func:`items_to_messages` it became: ``start`` to ``end``, ``end`` excluded."""
    return _converted(items).spans


def read_window(items: list[Item]) -> list[Item]:
    """The items a model reads of a run of (opened) items, in the order it reads them: from the newest
    response's ``compaction`` item on, with the items before it that its response never read right after it
    (:func:`_read_order`)."""
    return [items[index] for index in _read_order(items)]


def _read_order(items: list[Item]) -> list[int]:
    """The indices of the items a model reads, in the order it reads them.

    The newest opened ``compaction`` item of a response stands for every item before it that the response read
    (its history holds them, summarized or as they were): reading starts there. In a conversation, though, a
    response stores its own items (its input, then its output with the ``compaction`` item) when it ends, so
    whatever a client added after the response read the conversation stands before them, unseen by the history
    (the item seals where the response's read ended and its own items begin: ``compaction.ConversationRead``).
    Those items are read right after the history, in the order stored, and before the items after the
    ``compaction`` item. That is the conversation's order for every item read on its own; the history is one
    sealed whole, so they cannot stand before the response's input within it, and they came in after that input
    was sent in any case.

    Where either bound is not among ``items`` (an item given in an input without the items it came after, a
    bound since deleted from the conversation), the item stands for every item before it, as one sealed without
    bounds (outside a conversation, or before they were sealed) does.
    """
    if not items:
        return []
    start = _last_window(items)
    return [start, *_unread(items, start), *range(start + 1, len(items))]


def _unread(items: list[Item], at: int) -> range:
    """The indices of the items before the ``compaction`` item at ``at`` that its response never read."""
    item = items[at]
    if not isinstance(item, CompactionItem) or item.history is None or item.unread is None:
        return range(0)
    last, first = item.unread
    index = {entry.id: position for position, entry in enumerate(items[:at])}
    if first not in index or (last is not None and last not in index):
        return range(0)
    return range(0 if last is None else index[last] + 1, index[first])


@dataclass(frozen=True)
class _Converted:
    messages: list[Message]
    positions: list[int | None]
    spans: dict[int, tuple[int, int]]


def _converted(items: list[Item]) -> _Converted:
    messages: list[Message] = []
    positions: list[int | None] = [None] * len(items)
    spans: dict[int, tuple[int, int]] = {}
    for index in _read_order(items):
        item = items[index]
        if isinstance(item, MessageItem):
            messages.append(_message(item))
        elif isinstance(item, FunctionCallOutputItem):
            messages.append(ToolResponseMessage(call_id=item.call_id, content=item.output))
        elif isinstance(item, FunctionCallItem):
            _append_call(messages, _function_call(item))
        elif isinstance(item, CompactionItem):
            # What it summarized stands in the conversation as the summary; the item's own text is sealed.
            first = len(messages)
            if item.history is not None:
                messages.extend(item.history)
            elif item.summary is not None:
                messages.append(compacted_message(item.summary))
            if len(messages) > first:
                spans[index] = (first, len(messages))
            continue
        else:
            if (replay := replayed(item)) is not None:
                _append_call(messages, replay.call)
                messages.append(ToolResponseMessage(call_id=replay.call.call_id, content=replay.output))
            continue
        positions[index] = len(messages) - 1
    return _Converted(messages, positions, spans)


def _last_window(items: list[Item]) -> int:
    """Where the newest opened ``compaction`` item of a response stands (0: there is none)."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if isinstance(item, CompactionItem) and item.history is not None:
            return index
    return 0


COMPACTED_HEADER = "[Summary of the conversation before this point]"


def compacted_message(summary: str) -> CompletionMessage:
    """A ``compaction`` item as the model reads it: the summary, said by the assistant."""
    return CompletionMessage(content=f"{COMPACTED_HEADER}\n{summary}", stop_reason="end_of_turn", tool_calls=[])


def _function_call(item: FunctionCallItem) -> ToolCall:
    return ToolCall(
        call_id=item.call_id,
        tool_name=item.name,
        arguments=parse_arguments(item.arguments),
        arguments_json=item.arguments or "{}",
    )


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
