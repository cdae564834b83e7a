"""The tool seam: what a server-side tool must provide."""

from __future__ import annotations

from typing import Any, Protocol

from ferryman.api.registry import Tool, ToolInvocationResult


class ServerTool(Protocol):
    """A tool the server runs itself."""

    @property
    def definition(self) -> Tool:
        """Name, description and parameters, as listed at ``/v1/tools``."""
        ...

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Run the tool; failures are returned in the result, not raised."""
        ...
