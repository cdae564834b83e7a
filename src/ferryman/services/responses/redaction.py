"""A response's input items in the form its input shields (``guardrails``) left them in.

The items are stored when the response starts, before any shield ran; a redacting
shield's form then replaces them (what ``input_items`` lists and the conversation
gets), so that what the caller sent outlives the check nowhere. Each item takes the
redacted content of the message it became (see :func:`~.items.message_positions`); a
``compaction`` item is sealed again over the redacted messages it became
(:meth:`~.compaction.Sealer.resealed`), so that no later response opens the text as sent.
A blocking shield withholds the input: each item a model would read gives way to
its placeholder (:func:`withheld_items`), which is all a later response replays.
"""

from __future__ import annotations

from ferryman.api.content import CompletionMessage, InterleavedContent, Message, TextContentItem, content_to_text
from ferryman.api.responses import (
    CompactionItem,
    ContentPart,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputText,
    Item,
    MessageItem,
    OutputText,
    Refusal,
)
from ferryman.storage.base import ResponseStore
from ferryman.withheld import withheld_item

from .compaction import Reseal, Sealing
from .items import compaction_spans, message_positions


class InputItems:
    """A response's input items kept in step with its turn's input: stored, and in ``items``.

    Args:
        store: Where the response's input items are stored.
        response_id: The response.
        items: The list the response adds to its conversation when it ends: it is changed in place.
        sealing: Seals the ``compaction`` items among them again, redacted.
    """

    def __init__(self, store: ResponseStore, response_id: str, items: list[Item], sealing: Sealing) -> None:
        self._store = store
        self._response_id = response_id
        self._items = items
        self._sealing = sealing

    async def redacted(self, given: list[Message], redacted: list[Message]) -> None:
        """Take the input shields' redactions of the items' messages."""
        sealed = any(isinstance(item, CompactionItem) for item in self._items)
        reseal = (await self._sealing.sealer()).resealed if sealed else None
        self._items[:] = redacted_items(self._items, given, redacted, reseal)
        await self._store.replace_items(self._response_id, self._items)

    async def withheld(self) -> None:
        """Put each item's placeholder in its place: an input shield blocked the input."""
        self._items[:] = withheld_items(self._items)
        await self._store.replace_items(self._response_id, self._items)


def withheld_items(items: list[Item]) -> list[Item]:
    """The items of a blocked input as they are kept (see :func:`~ferryman.withheld.withheld_item`)."""
    return [withheld_item(item) for item in items]


def redacted_items(
    items: list[Item], given: list[Message], redacted: list[Message], reseal: Reseal | None = None
) -> list[Item]:
    """The items with the redactions of their messages (``given``, of :func:`items_to_messages`) applied.

    ``reseal`` seals an opened ``compaction`` item over its redacted messages (required when one changed).
    """
    spans = compaction_spans(items)
    out: list[Item] = []
    for index, (item, at) in enumerate(zip(items, message_positions(items), strict=True)):
        if isinstance(item, CompactionItem) and index in spans:
            start, end = spans[index]
            if given[start:end] == redacted[start:end]:
                out.append(item)
            else:
                assert reseal is not None, "a compaction item was redacted: it must be sealed again"
                out.append(reseal(item, redacted[start:end]))
        elif at is None or given[at] == redacted[at]:
            out.append(item)
        else:
            out.append(_redacted(item, redacted[at]))
    return out


def _redacted(item: Item, message: Message) -> Item:
    if isinstance(item, MessageItem):
        return item.model_copy(update={"content": _content(item.content, _texts(message.content))})
    if isinstance(item, FunctionCallOutputItem):
        return item.model_copy(update={"output": content_to_text(message.content)})
    if isinstance(item, FunctionCallItem) and isinstance(message, CompletionMessage):
        for call in message.tool_calls or []:
            if call.call_id == item.call_id:
                return item.model_copy(update={"arguments": call.arguments_json or "{}"})
    return item


def _texts(content: InterleavedContent) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, TextContentItem):
        return [content.text]
    if isinstance(content, list):
        return [part.text for part in content if isinstance(part, TextContentItem)]
    return []


def _content(content: str | list[ContentPart], texts: list[str]) -> str | list[ContentPart]:
    """The item's content with its text in the redacted form; other parts (images) stay."""
    if isinstance(content, str):
        return "".join(texts)
    textual = [i for i, part in enumerate(content) if isinstance(part, InputText | OutputText)]
    parts = list(content)
    if len(textual) == len(texts):  # a user message: one text part per text of its message
        for i, text in zip(textual, texts, strict=True):
            parts[i] = parts[i].model_copy(update={"text": text})
        return parts
    # Other roles read their parts joined as one text: that text, redacted, is now the one part.
    written = [part for part in parts if isinstance(part, InputText | OutputText | Refusal)]
    joined = "".join(texts)
    first = written[0] if written else InputText(text="")
    part = first.model_copy(update={"refusal": joined} if isinstance(first, Refusal) else {"text": joined})
    return [part, *(p for p in parts if not isinstance(p, InputText | OutputText | Refusal))]
