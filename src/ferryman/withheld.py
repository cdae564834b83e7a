"""What stands in for content a shield blocked, wherever that content was kept.

A blocked input, a tool call's blocked arguments: once a shield has blocked them they
are never sent to a model or a guard again, so every stored form of them (the turn's
record and history messages, a response's input items, the call in the assistant
message and the steps) takes a placeholder instead. The placeholders keep what a model
needs to read the conversation on (each message's role, each call's id and tool), and
say what happened; the violation itself is the ``shield_call`` step's. The raw text is
kept only where an operator asked for it (``safety.keep_blocked_text``), in that step's
violation metadata, which no history is ever built from.
"""

from __future__ import annotations

import json
from typing import Any

from ferryman.api.agents import SafetyViolation
from ferryman.api.content import (
    CompletionMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from ferryman.api.responses import (
    CompactionItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    HostedCallItem,
    InputText,
    Item,
    MessageItem,
    OutputText,
)

WITHHELD_TEXT = "[withheld: blocked by a safety shield]"
"""What a blocked message's content becomes."""

WITHHELD_ARGUMENTS: dict[str, Any] = {"withheld": "blocked by a safety shield"}
"""What a blocked tool call's arguments become."""

WITHHELD_ARGUMENTS_JSON = json.dumps(WITHHELD_ARGUMENTS)
""":data:`WITHHELD_ARGUMENTS` as a call's argument text."""

KEPT_KEY = "blocked_messages"
"""The violation metadata key that holds the blocked messages when ``keep_blocked_text`` is on."""


def withheld_call(call: ToolCall) -> ToolCall:
    """The call with its arguments replaced by :data:`WITHHELD_ARGUMENTS` (its id and tool stay)."""
    return call.model_copy(update={"arguments": dict(WITHHELD_ARGUMENTS), "arguments_json": WITHHELD_ARGUMENTS_JSON})


def withheld_message(message: Message) -> Message:
    """The message as it is kept once a shield blocked it: its role (and call ids) with placeholder content.

    Every part goes (images, a user message's context): a blocked message is blocked whole.
    """
    if isinstance(message, UserMessage):
        return UserMessage(content=WITHHELD_TEXT)
    if isinstance(message, ToolResponseMessage):
        return ToolResponseMessage(call_id=message.call_id, content=WITHHELD_TEXT)
    if isinstance(message, SystemMessage):
        return SystemMessage(content=WITHHELD_TEXT)
    calls = [withheld_call(call) for call in message.tool_calls or []]
    # Calls alone (a Responses input's function calls) stay without text, as their items replay them.
    content = WITHHELD_TEXT if message.content else ""
    return CompletionMessage(content=content, stop_reason=message.stop_reason, tool_calls=calls)


def withheld_item(item: Item) -> Item:
    """A Responses item of a blocked input as it is kept: what a model would read of it is withheld.

    A message keeps its role, a function call its call id and name, an output its call id;
    a hosted tool's call item (which replays as a call and its output) and a ``compaction`` item (which
    replays as the history or summary it seals) become a user message saying it was withheld; items no model
    reads (approval requests and decisions) stay.
    """
    if isinstance(item, MessageItem):
        part = OutputText(text=WITHHELD_TEXT) if item.role == "assistant" else InputText(text=WITHHELD_TEXT)
        return item.model_copy(update={"content": [part]})
    if isinstance(item, FunctionCallItem):
        return item.model_copy(update={"arguments": WITHHELD_ARGUMENTS_JSON})
    if isinstance(item, FunctionCallOutputItem):
        return item.model_copy(update={"output": WITHHELD_TEXT})
    if isinstance(item, HostedCallItem | CompactionItem):
        return MessageItem(id=item.id, role="user", content=[InputText(text=WITHHELD_TEXT)], status="completed")
    return item


def kept_for_review(violation: SafetyViolation, messages: list[Message]) -> SafetyViolation:
    """The violation with the messages it blocked in its metadata, for an operator's review (never replayed)."""
    kept = [message.model_dump(mode="json") for message in messages]
    return violation.model_copy(update={"metadata": {**violation.metadata, KEPT_KEY: kept}})
