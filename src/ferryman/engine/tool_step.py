"""Running the server-side tool calls of one inference step."""

from __future__ import annotations

import asyncio
import logging

from ferryman.api.content import ToolCall, ToolResponse

from .plan import TurnPlan

log = logging.getLogger(__name__)


async def run_server_tools(calls: list[ToolCall], plan: TurnPlan) -> list[ToolResponse]:
    """Run server tools concurrently; unknown tools and failures become error responses for the model."""
    return list(await asyncio.gather(*(_run_one(call, plan) for call in calls)))


async def _run_one(call: ToolCall, plan: TurnPlan) -> ToolResponse:
    bound = plan.server_tools.get(call.tool_name)
    if bound is None:
        known = ", ".join(sorted([*plan.server_tools, *plan.client_tools])) or "none"
        return _error(call, f"unknown tool '{call.tool_name}'; available tools: {known}")
    if not isinstance(call.arguments, dict):
        return _error(call, f"arguments are not a JSON object: {call.arguments}")
    try:
        result = await bound.invoke(call.arguments)
    except Exception:
        log.exception("tool %s failed", call.tool_name)
        return _error(call, f"tool '{call.tool_name}' failed")
    if result.error_message:
        return _error(call, result.error_message)
    return ToolResponse(
        call_id=call.call_id, tool_name=call.tool_name, content=result.content or "", metadata=result.metadata
    )


def _error(call: ToolCall, message: str) -> ToolResponse:
    return ToolResponse(
        call_id=call.call_id, tool_name=call.tool_name, content=f"error: {message}", metadata={"error": True}
    )
