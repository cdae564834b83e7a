"""One tool of an MCP server as a server tool: the one seam registered toolgroups and the Responses ``mcp`` tool share.

Where a call's credentials come from differs: a registered toolgroup's come
from the running call's provider data (:func:`from_provider_data`), a
Responses ``mcp`` tool's from the request that offers it (:func:`fixed`).
Either way they are resolved when the tool runs and never kept beyond it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from ferryman.api.content import ToolDef
from ferryman.api.registry import Tool, ToolInvocationResult

from ..context import tool_context
from .endpoint import McpEndpoint
from .pool import McpClientPool

PROVIDER_ID = "model-context-protocol"
"""The provider id Llama Stack lists MCP tools (and toolgroups served by an MCP server) under."""

EndpointSource = Callable[[], McpEndpoint]
"""Gives the server, with the credentials of the call about to run."""


def fixed(endpoint: McpEndpoint) -> EndpointSource:
    """Always the same server and credentials (a Responses request's own)."""
    return lambda: endpoint


def from_provider_data(uri: str) -> EndpointSource:
    """The server at ``uri`` with the credentials the running call's provider data names for it."""
    return lambda: provider_endpoint(uri, tool_context.get().provider_data)


def provider_endpoint(uri: str, provider_data: dict[str, Any] | None) -> McpEndpoint:
    """The server at ``uri`` with the credentials ``provider_data`` names for it (see :func:`provider_headers`)."""
    return McpEndpoint(url=uri, headers=provider_headers(uri, provider_data))


def provider_headers(uri: str, provider_data: dict[str, Any] | None) -> dict[str, str]:
    """Llama Stack's per-request MCP credentials for the server at ``uri`` (never log them).

    ``mcp_headers`` (``{uri: {header: value}}``) and ``mcp_authorization``
    (``{uri: token}``, sent as a bearer token) are matched to ``uri`` by host and path.
    """
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


def _canonical(uri: str) -> str:
    parts = urlsplit(uri)
    return f"{parts.netloc}/{parts.path.strip('/')}"


class McpTool:
    """A server tool that forwards each invocation to an MCP server through the pool.

    Args:
        pool: The shared MCP sessions.
        listed: The tool as the server listed it (its raw input schema and annotations included).
        toolgroup_id: The group it is listed under.
        endpoint: The server, with the credentials of the call about to run.
        name: The name the model knows it by (default: its name on the server).
    """

    def __init__(
        self,
        pool: McpClientPool,
        listed: ToolDef,
        toolgroup_id: str,
        endpoint: EndpointSource,
        name: str | None = None,
    ) -> None:
        self._pool = pool
        self._listed = listed
        self._endpoint = endpoint
        self._definition = Tool(
            identifier=name or listed.name,
            toolgroup_id=toolgroup_id,
            provider_id=PROVIDER_ID,
            provider_resource_id=listed.name,
            description=listed.description or "",
            parameters=list(listed.parameters or []),
            metadata={**(listed.metadata or {}), "endpoint": endpoint().display_url},
        )

    @property
    def definition(self) -> Tool:
        """The tool as ``/v1/tools`` lists it: its annotations, its endpoint without user info or query (secrets)."""
        return self._definition

    @property
    def input_schema(self) -> dict[str, Any] | None:
        """The server's full JSON schema of the arguments (offered to the model whole, nested objects included)."""
        return self._listed.input_schema

    @property
    def listed(self) -> ToolDef:
        """The tool as the MCP server listed it."""
        return self._listed

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Call the tool on its server with the running call's credentials; every failure is an error result."""
        return await self._pool.call_tool(self._endpoint(), self._listed.name, arguments)
