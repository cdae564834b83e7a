"""Toolgroups and how an agent's references to them resolve to runnable tools."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ferryman.api.agents import ToolGroupRef, ToolGroupWithArgs
from ferryman.api.content import ToolDef
from ferryman.api.registry import Tool, ToolGroup, ToolInvocationResult
from ferryman.errors import InvalidRequestError, NotFoundError
from ferryman.knowledge.rag import Searcher

from .base import ServerTool
from .calculator import Calculator
from .knowledge_search import TOOLGROUP_ID as RAG_TOOLGROUP
from .knowledge_search import KnowledgeSearch
from .websearch import TOOLGROUP_ID as WEBSEARCH_TOOLGROUP
from .websearch import WebSearch


@dataclass(frozen=True)
class BoundTool:
    """A server tool with the arguments its toolgroup reference binds."""

    tool: ServerTool
    bound_args: dict[str, Any] = field(default_factory=dict)

    def as_tool_def(self) -> ToolDef:
        """The definition offered to the model (bound arguments are not its to choose)."""
        definition = self.tool.definition
        params = [p for p in definition.parameters if p.name not in self.bound_args]
        schema = getattr(self.tool, "input_schema", None)  # an MCP tool's full schema, nested objects included
        if isinstance(schema, dict) and schema.get("properties"):
            schema = _unbound(schema, set(self.bound_args))
        else:
            schema = None
        return ToolDef(
            name=definition.identifier, description=definition.description, parameters=params, input_schema=schema
        )

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Run with the model's arguments and the bound ones (bound win)."""
        return await self.tool.invoke({**arguments, **self.bound_args})


DEFAULT_MAX_OUTPUT_CHARS = 20_000
"""How much of one tool's text output a model sees, unless configured (``tools.max_output_chars``)."""


class ToolGroupSource(Protocol):
    """Toolgroups registered at run time (stored, possibly served by MCP servers), as the caller may use them."""

    async def has_group(self, toolgroup_id: str) -> bool:
        """Whether a registered group of that id exists for the caller."""
        ...

    async def group_tools(self, toolgroup_id: str, provider_data: dict[str, Any] | None) -> list[ServerTool] | None:
        """The tools of a registered group the caller may read; None when there is no such group (for it).

        ``provider_data`` carries the request's credentials for the servers that list them.

        Raises:
            ToolsUnlistedError: the group exists but its tools cannot be listed now (its MCP server is down).
        """
        ...


def _unbound(schema: dict[str, Any], bound: set[str]) -> dict[str, Any]:
    """A JSON schema without the properties a toolgroup reference binds."""
    if not bound:
        return schema
    properties = {k: v for k, v in schema["properties"].items() if k not in bound}
    required = [name for name in schema.get("required") or [] if name not in bound]
    return {**schema, "properties": properties, "required": required}


class ToolRegistry:
    """Every server-side toolgroup the server offers: the builtin ones, and those a source registers.

    Args:
        max_output_chars: How much of one tool's text output a model sees.
    """

    def __init__(self, max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS) -> None:
        self._groups: dict[str, dict[str, ServerTool]] = {}
        self.max_output_chars = max_output_chars
        self.source: ToolGroupSource | None = None
        """Where groups that are not builtin come from (None: builtin ones only)."""

    def is_builtin(self, toolgroup_id: str) -> bool:
        """Whether the id names a builtin group."""
        return toolgroup_id in self._groups

    def builtin_tools(self, toolgroup_id: str) -> list[ServerTool]:
        """The tools of a builtin group, or NotFoundError."""
        self.get_group(toolgroup_id)
        return list(self._groups[toolgroup_id].values())

    def register(self, toolgroup_id: str, tools: list[ServerTool]) -> None:
        """Add a toolgroup."""
        self._groups[toolgroup_id] = {tool.definition.identifier: tool for tool in tools}

    def groups(self) -> list[ToolGroup]:
        """Every toolgroup."""
        return [ToolGroup(identifier=group_id) for group_id in self._groups]

    def get_group(self, toolgroup_id: str) -> ToolGroup:
        """One toolgroup or NotFoundError."""
        if toolgroup_id not in self._groups:
            raise NotFoundError(f"toolgroup '{toolgroup_id}' not found; available: {self._known()}")
        return ToolGroup(identifier=toolgroup_id)

    def tools(self, toolgroup_id: str | None = None) -> list[Tool]:
        """Tools of one group, or of all."""
        if toolgroup_id is not None:
            if toolgroup_id not in self._groups and "/" in toolgroup_id:
                return [tool.definition for tool in self._select(toolgroup_id)]
            self.get_group(toolgroup_id)
            return [tool.definition for tool in self._groups[toolgroup_id].values()]
        return [tool.definition for group in self._groups.values() for tool in group.values()]

    def get_tool(self, name: str) -> ServerTool:
        """A tool by name, or NotFoundError."""
        for group in self._groups.values():
            if name in group:
                return group[name]
        raise NotFoundError(f"tool '{name}' not found")

    async def resolve(
        self, refs: list[ToolGroupRef], provider_data: dict[str, Any] | None = None, offline: bool = False
    ) -> dict[str, BoundTool]:
        """Map tool names to runnable tools for a list of toolgroup references (builtin or registered).

        Args:
            refs: The references.
            provider_data: The request's provider data (credentials of the servers that list registered groups).
            offline: Only check that registered groups exist, without listing their tools (they add none).

        Raises:
            InvalidRequestError: a reference names no toolgroup or tool (a deleted registration included).
            ToolsUnlistedError: a registered group's tools cannot be listed now.
        """
        bound: dict[str, BoundTool] = {}
        for ref in refs:
            name, args = (ref.name, ref.args) if isinstance(ref, ToolGroupWithArgs) else (ref, {})
            for tool in await self._select_any(name, provider_data, offline):
                bound[tool.definition.identifier] = BoundTool(tool, dict(args))
        return bound

    async def _select_any(self, name: str, provider_data: dict[str, Any] | None, offline: bool) -> list[ServerTool]:
        group_id, _, tool_name = name.rpartition("/")
        source = self.source
        if name in self._groups or group_id in self._groups or source is None:
            return self._select(name)
        if offline:
            if await source.has_group(name) or (group_id and await source.has_group(group_id)):
                return []
        elif (tools := await source.group_tools(name, provider_data)) is not None:
            return tools
        elif group_id and (tools := await source.group_tools(group_id, provider_data)) is not None:
            picked = [tool for tool in tools if tool.definition.identifier == tool_name]
            if picked:
                return picked
        raise InvalidRequestError(
            f"unknown toolgroup or tool '{name}' (builtin toolgroups: {self._known()}; "
            "registered ones are listed at /v1/toolgroups)",
            "toolgroups",
        )

    def _select(self, name: str) -> list[ServerTool]:
        if name in self._groups:
            return list(self._groups[name].values())
        group_id, _, tool_name = name.rpartition("/")
        group = self._groups.get(group_id)
        if group is not None and tool_name in group:
            return [group[tool_name]]
        raise InvalidRequestError(f"unknown toolgroup or tool '{name}'; available: {self._known()}", "toolgroups")

    def _known(self) -> str:
        return ", ".join(sorted(self._groups)) or "none"


def builtin_tools(
    search: Searcher | None = None,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    web_search: WebSearch | None = None,
) -> ToolRegistry:
    """The registry of tools that ship with ferryman.

    ``search`` (the knowledge search service) adds ``builtin::rag``; ``web_search`` adds ``builtin::websearch``.
    """
    registry = ToolRegistry(max_output_chars)
    registry.register("builtin::math", [Calculator()])
    if search is not None:
        registry.register(RAG_TOOLGROUP, [KnowledgeSearch(search)])
    if web_search is not None:
        registry.register(WEBSEARCH_TOOLGROUP, [web_search])
    return registry
