"""Toolgroups and how an agent's references to them resolve to runnable tools."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ferryman.api.agents import ToolGroupRef, ToolGroupWithArgs
from ferryman.api.content import ToolDef
from ferryman.api.registry import Tool, ToolGroup, ToolInvocationResult
from ferryman.errors import InvalidRequestError, NotFoundError
from ferryman.knowledge.rag import Searcher

from .base import ServerTool
from .calculator import Calculator
from .knowledge_search import TOOLGROUP_ID as RAG_TOOLGROUP
from .knowledge_search import KnowledgeSearch


@dataclass(frozen=True)
class BoundTool:
    """A server tool with the arguments its toolgroup reference binds."""

    tool: ServerTool
    bound_args: dict[str, Any] = field(default_factory=dict)

    def as_tool_def(self) -> ToolDef:
        """The definition offered to the model (bound arguments are not its to choose)."""
        definition = self.tool.definition
        params = [p for p in definition.parameters if p.name not in self.bound_args]
        return ToolDef(name=definition.identifier, description=definition.description, parameters=params)

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Run with the model's arguments and the bound ones (bound win)."""
        return await self.tool.invoke({**arguments, **self.bound_args})


class ToolRegistry:
    """Every server-side toolgroup the server offers."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, ServerTool]] = {}

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

    def resolve(self, refs: list[ToolGroupRef]) -> dict[str, BoundTool]:
        """Map tool names to runnable tools for a list of toolgroup references.

        Raises:
            InvalidRequestError: a reference names no toolgroup or tool.
        """
        bound: dict[str, BoundTool] = {}
        for ref in refs:
            name, args = (ref.name, ref.args) if isinstance(ref, ToolGroupWithArgs) else (ref, {})
            for tool in self._select(name):
                bound[tool.definition.identifier] = BoundTool(tool, dict(args))
        return bound

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


def builtin_tools(search: Searcher | None = None) -> ToolRegistry:
    """The registry of tools that ship with ferryman and need no network.

    ``search`` (the knowledge search service) adds ``builtin::rag``.
    """
    registry = ToolRegistry()
    registry.register("builtin::math", [Calculator()])
    if search is not None:
        registry.register(RAG_TOOLGROUP, [KnowledgeSearch(search)])
    return registry
