"""The one table from a stored hosted-call item to how its kind replays it to the model.

When a response continues a conversation, its earlier items become messages
again (``items.py``); each hosted kind says what its call items were to the
model. An item type not in the table (``mcp_list_tools``, approval requests
and responses) was never the model's to read and becomes nothing.
"""

from __future__ import annotations

from ferryman.api.responses import CodeInterpreterCallItem, FileSearchCallItem, Item, McpCallItem, WebSearchCallItem

from . import code_interpreter, file_search, mcp, web_search
from .base import Replay, Replayed

REPLAYS: dict[type[Item], Replay] = {
    FileSearchCallItem: file_search.replay_call,
    McpCallItem: mcp.replay_call,
    CodeInterpreterCallItem: code_interpreter.replay_call,
    WebSearchCallItem: web_search.replay_call,
}


def replayed(item: Item) -> Replayed | None:
    """A hosted call item as the model read it, or None for an item it never read (or not a hosted call)."""
    replay = REPLAYS.get(type(item))
    return replay(item) if replay is not None else None
