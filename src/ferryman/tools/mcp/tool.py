"""One tool of an MCP server, as a server tool of a registered toolgroup."""

from __future__ import annotations

from typing import Any

from ferryman.api.content import ToolDef
from ferryman.api.registry import Tool, ToolInvocationResult

from .endpoint import McpEndpoint
from .pool import McpClientPool

PROVIDER_ID = "model-context-protocol"
"""The provider id Llama Stack lists MCP tools under."""


class McpTool:
    """A server tool that forwards each invocation to an MCP server through the pool.

    Args:
        pool: The shared MCP sessions.
        endpoint: The server (its headers are the toolgroup's credentials).
        tool: The tool as the server listed it.
        toolgroup_id: The toolgroup it is listed under.
    """

    def __init__(self, pool: McpClientPool, endpoint: McpEndpoint, tool: ToolDef, toolgroup_id: str) -> None:
        self._pool = pool
        self._endpoint = endpoint
        self._tool = tool
        self._definition = Tool(
            identifier=tool.name,
            toolgroup_id=toolgroup_id,
            provider_id=PROVIDER_ID,
            provider_resource_id=tool.name,
            description=tool.description or "",
            parameters=tool.parameters or [],
            metadata={"endpoint": endpoint.display_url, "input_schema": tool.input_schema},
        )

    @property
    def definition(self) -> Tool:
        """Name, description and parameters as the MCP server listed them (the raw schema in metadata)."""
        return self._definition

    @property
    def tool_def(self) -> ToolDef:
        """The tool as the MCP server listed it, with its raw input schema."""
        return self._tool

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Call the tool on the server; every failure is returned as an error result."""
        return await self._pool.call_tool(self._endpoint, self._tool.name, arguments)
