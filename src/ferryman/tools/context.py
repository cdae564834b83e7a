"""What a server tool may know about the call it serves: the session, the turn, the caller's provider data.

The engine sets :data:`tool_context` around each server tool's invocation (the
tool runs in the turn's task, so the context is the turn's); tools outside a
turn (``/v1/tool-runtime/invoke``) see the request's context or none.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolContext:
    """The call a tool serves.

    Attributes:
        session_id: The session the turn belongs to (state kept per session lives under it), if any.
        turn_id: The turn, if any.
        provider_data: The request's provider data (per-request keys such as ``tavily_search_api_key``);
            a tool reads what it needs and never stores or logs it.
        agent_id: The agent whose turn it is (None: a response, or no turn); its memory is what
            ``builtin::memory`` edits.
    """

    session_id: str | None = None
    turn_id: str | None = None
    provider_data: dict[str, Any] = field(default_factory=dict)
    agent_id: str | None = None


NO_CONTEXT = ToolContext()
"""Outside any tool call: no session, no turn, no provider data (frozen; nobody mutates its dict)."""

tool_context: ContextVar[ToolContext] = ContextVar("tool_context", default=NO_CONTEXT)
"""The context of the tool call running in this task."""
