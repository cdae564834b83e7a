"""Running the server-side tool calls of one inference step: in the call's tool context, timed, bounded."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ferryman.api.content import InterleavedContent, TextContentItem, ToolCall, ToolResponse
from ferryman.metrics import instruments as metrics
from ferryman.tools.context import ToolContext, tool_context
from ferryman.tools.registry import BoundTool

from .plan import TurnPlan
from .tracing import record_tool, tool_span

log = logging.getLogger(__name__)

OWN_TOOLS = "builtin"
"""The ``provider_id`` of the server's own tools, whose names its code fixes."""
LISTED_TOOL = "mcp"
"""The ``tool`` label of a tool an MCP server listed: its name is that server's (a caller's, perhaps), so not a
label value."""


async def run_server_tools(calls: list[ToolCall], plan: TurnPlan, context: ToolContext) -> list[ToolResponse]:
    """Run server tools concurrently; unknown tools and failures become error responses for the model.

    Args:
        calls: The model's calls of server tools.
        plan: The turn's plan (its tools and output limit).
        context: The session, turn and provider data each tool sees through :data:`tool_context`.

    Each response's metadata carries the call's ``duration_ms``.
    """
    return list(await asyncio.gather(*(_timed(call, plan, context) for call in calls)))


async def _timed(call: ToolCall, plan: TurnPlan, context: ToolContext) -> ToolResponse:
    # Each gathered call runs in its own task, with its own copy of the context: setting it here is the call's alone.
    tool_context.set(context)
    started = time.perf_counter()
    with tool_span(call) as span:
        response = await _run_one(call, plan)
        record_tool(span, call, response, _failure(call, plan, response))
    duration_ms = round((time.perf_counter() - started) * 1000, 3)
    metadata = {**(response.metadata or {}), "duration_ms": duration_ms}
    return response.model_copy(update={"metadata": metadata})


async def _run_one(call: ToolCall, plan: TurnPlan) -> ToolResponse:
    bound = plan.server_tools.get(call.tool_name)
    if bound is None:
        # The model named it: not a label value (only the turn's own tools are).
        metrics.tool_called("unknown", "unknown_tool")
        known = ", ".join(sorted([*plan.server_tools, *plan.client_tools])) or "none"
        return _error(call, f"unknown tool '{call.tool_name}'; available tools: {known}")
    label = _label(bound)
    if not isinstance(call.arguments, dict):
        metrics.tool_called(label, "invalid_arguments")
        return _error(call, f"arguments are not a JSON object: {call.arguments}")
    try:
        result = await bound.invoke(call.arguments)
    except Exception:
        log.exception("tool %s failed", call.tool_name)
        metrics.tool_called(label, "error")
        return _error(call, f"tool '{call.tool_name}' failed")
    metrics.tool_called(label, "error" if result.error_message else "ok")
    if result.error_message:
        return _error(call, result.error_message)
    content, truncated = truncate(result.content or "", plan.max_tool_output_chars)
    metadata: dict[str, Any] = dict(result.metadata or {})
    if truncated:
        metadata["truncated"] = True
    return ToolResponse(call_id=call.call_id, tool_name=call.tool_name, content=content, metadata=metadata)


def _label(bound: BoundTool) -> str:
    """The call's ``tool`` label: one of the server's own tools by name, any tool an MCP server listed as ``mcp``."""
    definition = bound.tool.definition
    return definition.identifier if definition.provider_id == OWN_TOOLS else LISTED_TOOL


def _failure(call: ToolCall, plan: TurnPlan, response: ToolResponse) -> str | None:
    """How a call failed, for its span's ``error.type`` (None: it did not)."""
    if not (response.metadata or {}).get("error"):
        return None
    if call.tool_name not in plan.server_tools:
        return "unknown_tool"
    return "invalid_arguments" if not isinstance(call.arguments, dict) else "tool_error"


def _error(call: ToolCall, message: str) -> ToolResponse:
    return ToolResponse(
        call_id=call.call_id, tool_name=call.tool_name, content=f"error: {message}", metadata={"error": True}
    )


def truncate(content: InterleavedContent, limit: int) -> tuple[InterleavedContent, bool]:
    """Cut a tool's text output to ``limit`` characters, with a note the model reads; say whether it was cut.

    Text items of a list share the limit in order; other items (images) pass.
    """
    if isinstance(content, str):
        total = len(content)
        return (content, False) if total <= limit else (content[:limit] + "\n" + _note(limit, total), True)
    items = content if isinstance(content, list) else [content]
    total = sum(len(item.text) for item in items if isinstance(item, TextContentItem))
    if total <= limit:
        return content, False
    kept: list[Any] = []
    left = limit
    for item in items:
        if not isinstance(item, TextContentItem):
            kept.append(item)
        elif left > 0:
            kept.append(item.model_copy(update={"text": item.text[:left]}))
            left -= min(left, len(item.text))
    kept.append(TextContentItem(text=_note(limit, total)))
    return kept, True


def _note(shown: int, total: int) -> str:
    return f"[output truncated: {shown} of {total} characters shown]"
