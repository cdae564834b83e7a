"""The tools of toolgroups registered at run time: an MCP server's, or a builtin group's under another id.

An MCP group's tools reach their server with the credentials of the request
that runs them: Llama Stack's provider data ``mcp_headers`` (``{uri: {header:
value}}``) and ``mcp_authorization`` (``{uri: token}``, sent as a bearer
token), matched to the group's endpoint by host and path. They are read from
:data:`~ferryman.tools.context.tool_context` when a tool runs, and never kept.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ferryman.api.content import ToolDef
from ferryman.api.registry import Tool, ToolInvocationResult

from .base import ServerTool
from .context import tool_context
from .mcp.endpoint import McpEndpoint
from .mcp.pool import McpClientPool

MCP_PROVIDER = "model-context-protocol"
"""The provider id of toolgroups served by an MCP server."""


def _canonical(uri: str) -> str:
    parts = urlsplit(uri)
    return f"{parts.netloc}/{parts.path.strip('/')}"


def mcp_headers(uri: str, provider_data: dict[str, Any] | None) -> dict[str, str]:
    """The headers the provider data names for the MCP server at ``uri`` (credentials: never log them)."""
    if not provider_data:
        return {}
    wanted = _canonical(uri)
    headers: dict[str, str] = {}
    for key, values in (provider_data.get("mcp_headers") or {}).items():
        if isinstance(values, dict) and _canonical(str(key)) == wanted:
            headers.update({str(name): str(value) for name, value in values.items()})
    for key, token in (provider_data.get("mcp_authorization") or {}).items():
        if isinstance(token, str) and _canonical(str(key)) == wanted:
            headers["Authorization"] = f"Bearer {token}"
    return headers


def mcp_endpoint(uri: str, provider_data: dict[str, Any] | None) -> McpEndpoint:
    """The endpoint of an MCP server with the request's credentials for it."""
    return McpEndpoint(url=uri, headers=mcp_headers(uri, provider_data))


class McpServerTool:
    """One tool of an MCP server, as a registered toolgroup offers it.

    Args:
        pool: The MCP sessions.
        uri: The server's endpoint.
        toolgroup_id: The group the tool belongs to.
        definition: The tool as the server listed it.
    """

    def __init__(self, pool: McpClientPool, uri: str, toolgroup_id: str, definition: ToolDef) -> None:
        self._pool = pool
        self._uri = uri
        self._def = definition
        self._tool = Tool(
            identifier=definition.name,
            toolgroup_id=toolgroup_id,
            provider_id=MCP_PROVIDER,
            provider_resource_id=uri,
            description=definition.description or "",
            parameters=list(definition.parameters or []),
            metadata={"endpoint": uri},
        )

    @property
    def definition(self) -> Tool:
        """The tool as ``/v1/tools`` lists it."""
        return self._tool

    @property
    def input_schema(self) -> dict[str, Any] | None:
        """The server's full JSON schema of the arguments (nested objects included)."""
        return self._def.input_schema

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Call the tool on its server with the running call's credentials; failures are error results."""
        endpoint = mcp_endpoint(self._uri, tool_context.get().provider_data)
        return await self._pool.call_tool(endpoint, self._def.name, arguments)


class AliasedTool:
    """A builtin tool offered by a registered group, with the group's ``args`` bound (the caller's win).

    Args:
        tool: The builtin tool.
        toolgroup_id: The registered group.
        args: The group's arguments, given to every call.
    """

    def __init__(self, tool: ServerTool, toolgroup_id: str, args: dict[str, Any]) -> None:
        self._inner = tool
        self._args = args
        self._tool = tool.definition.model_copy(update={"toolgroup_id": toolgroup_id})

    @property
    def definition(self) -> Tool:
        """The builtin tool's definition, under the registered group."""
        return self._tool

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Run the builtin tool with the group's arguments under the call's."""
        return await self._inner.invoke({**self._args, **arguments})
