"""MCP servers as tool providers, through the official ``mcp`` SDK.

:class:`McpClientPool` keeps one session per server and credentials,
:class:`McpEndpoint` names a server (its headers are credentials, never shown),
and :class:`McpTool` is one of its tools as a server tool (for registered
toolgroups and the Responses ``mcp`` tool alike).
"""

from ferryman.logs import redacted_url

from .endpoint import McpEndpoint, McpTransport, check_url
from .pool import McpClientPool, McpSettings
from .tool import PROVIDER_ID, EndpointSource, McpTool, fixed, from_provider_data, provider_endpoint

__all__ = [
    "PROVIDER_ID",
    "EndpointSource",
    "McpClientPool",
    "McpEndpoint",
    "McpSettings",
    "McpTool",
    "McpTransport",
    "check_url",
    "fixed",
    "from_provider_data",
    "provider_endpoint",
    "redacted_url",
]
