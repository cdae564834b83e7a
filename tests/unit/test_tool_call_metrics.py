"""``ferryman_tool_calls_total``'s ``tool`` label is bounded: the server's own tools by name, never a name an MCP
server chose (on the Responses API, any caller's server: a label value per invented name would grow without end)."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from ferryman.api.content import ToolCall
from ferryman.api.registry import Tool, ToolInvocationResult
from ferryman.engine.plan import TurnPlan
from ferryman.engine.tool_step import run_server_tools
from ferryman.inference.base import Sampling
from ferryman.tools.context import ToolContext
from ferryman.tools.mcp.tool import PROVIDER_ID as MCP_PROVIDER
from ferryman.tools.registry import BoundTool

pytestmark = pytest.mark.anyio


class Named:
    """A server tool named ``name`` by ``provider_id`` (``builtin``: the server's own)."""

    def __init__(self, name: str, provider_id: str) -> None:
        self._definition = Tool(
            identifier=name, toolgroup_id="g", provider_id=provider_id, description="", parameters=[]
        )

    @property
    def definition(self) -> Tool:
        return self._definition

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        return ToolInvocationResult(content="done")


def _plan(*tools: Named) -> TurnPlan:
    server_tools = {tool.definition.identifier: BoundTool(tool) for tool in tools}
    return TurnPlan("m", "", Sampling(), None, None, 5, server_tools, {}, [], [])


def _calls(tool: str, outcome: str) -> float:
    return REGISTRY.get_sample_value("ferryman_tool_calls_total", {"tool": tool, "outcome": outcome}) or 0.0


async def test_an_mcp_servers_tool_names_are_no_label_values_the_servers_own_tools_are() -> None:
    invented = "exfil_7f3a9c_" + "x" * 40
    plan = _plan(Named(invented, MCP_PROVIDER), Named("calculator", "builtin"))
    before = {(tool, outcome): _calls(tool, outcome) for tool in ("mcp", "calculator") for outcome in ("ok",)}
    calls = [
        ToolCall(call_id="c1", tool_name=invented, arguments={}),
        ToolCall(call_id="c2", tool_name=invented, arguments="not json"),
        ToolCall(call_id="c3", tool_name="calculator", arguments={}),
    ]
    await run_server_tools(calls, plan, ToolContext())
    assert _calls(invented, "ok") == _calls(invented, "invalid_arguments") == 0
    assert _calls("mcp", "ok") == before[("mcp", "ok")] + 1
    assert _calls("calculator", "ok") == before[("calculator", "ok")] + 1
