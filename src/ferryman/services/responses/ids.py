"""Item ids: OpenAI's prefix of each item type and a random part."""

from __future__ import annotations

from ferryman.ids import new_id

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
    "compaction": "cmp",
}


def new_item_id(kind: str) -> str:
    """An OpenAI-style id: ``msg_…``, ``fc_…``, ``fco_…``, ``fs_…``."""
    return new_id(_PREFIX[kind])
