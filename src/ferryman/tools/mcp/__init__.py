"""MCP servers as tool providers, through the official ``mcp`` SDK.

:class:`McpClientPool` keeps one session per server and credentials,
:class:`McpEndpoint` names a server (its headers are credentials, never shown),
and :class:`McpTool` is one of its tools as a server tool.
"""

from .endpoint import McpEndpoint, McpTransport, check_url, redacted_url
from .pool import McpClientPool, McpSettings
from .tool import PROVIDER_ID, McpTool

__all__ = [
    "PROVIDER_ID",
    "McpClientPool",
    "McpEndpoint",
    "McpSettings",
    "McpTool",
    "McpTransport",
    "check_url",
    "redacted_url",
]
