"""A builtin group's tools registered at run time under another id, with the registration's ``args``.

(An MCP server's tools are :class:`ferryman.tools.mcp.McpTool`, with the running call's credentials.)
"""

from __future__ import annotations

from typing import Any

from ferryman.api.registry import Tool, ToolInvocationResult

from .base import ServerTool


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
