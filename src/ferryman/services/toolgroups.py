"""Toolgroups: the builtin ones, and those registered at run time (persisted, owned, on every replica).

A registration names a provider: ``model-context-protocol`` with an
``mcp_endpoint`` (the group's tools are the MCP server's, listed with the
credentials of the request that uses them), or a builtin toolgroup id (the
group offers that group's tools with its ``args`` bound). Registrations are
read from storage on every use, so every replica sees one at once and a
deleted group fails the next turn that names it with a clear 400.
"""

from __future__ import annotations

import logging
from typing import Any

from ferryman.api.content import ToolDef
from ferryman.api.registry import RegisterToolGroupRequest, Tool, ToolGroup, ToolInvocationResult
from ferryman.auth.principal import current_principal
from ferryman.errors import ConflictError, InvalidRequestError, NotFoundError, ToolsUnlistedError, UpstreamError
from ferryman.tools.base import ServerTool
from ferryman.tools.context import ToolContext, tool_context
from ferryman.tools.mcp import PROVIDER_ID as MCP_PROVIDER
from ferryman.tools.mcp import McpTool, from_provider_data, provider_endpoint
from ferryman.tools.mcp.pool import McpClientPool
from ferryman.tools.registered import AliasedTool
from ferryman.tools.registry import BoundTool, ToolRegistry

from .idempotency import Claim, answered, settlement, stored_record
from .registrations import Registrations

log = logging.getLogger(__name__)


class ToolGroupService:
    """Registering, listing, resolving and invoking toolgroups and their tools.

    Args:
        registry: The builtin groups; this service becomes its source of registered ones.
        registered: The registrations (owned: a caller sees the groups it may read).
        mcp: The MCP sessions (None: MCP toolgroups cannot be registered).
    """

    def __init__(
        self, registry: ToolRegistry, registered: Registrations[ToolGroup], mcp: McpClientPool | None = None
    ) -> None:
        self._registry = registry
        self._groups = registered
        self._mcp = mcp
        registry.source = self

    # ---- registrations ---------------------------------------------------

    async def register(self, request: RegisterToolGroupRequest, key: Claim | None = None) -> ToolGroup:
        """Register a toolgroup; the same registration again is a no-op. ``key`` (the request's idempotency key)
        is claimed by the write that stores a new registration, answered with it.

        Raises:
            InvalidRequestError: an unknown provider, or an MCP group without an endpoint.
            ConflictError: the id is builtin, or registered with other settings (or by another caller).
        """
        group_id = request.toolgroup_id
        if self._registry.is_builtin(group_id):
            raise ConflictError(f"toolgroup '{group_id}' is builtin; register under another id")
        group = ToolGroup(
            identifier=group_id,
            provider_id=request.provider_id,
            provider_resource_id=group_id,
            args=request.args,
            mcp_endpoint=request.mcp_endpoint,
        )
        self._check_provider(group)
        who = current_principal.get()
        existing = await self._groups.find(who, group_id)
        if existing is None:
            await self._groups.create(who, group, settlement(key, answered(group)))
            stored_record(key)
            return group
        if existing != group:
            raise ConflictError(f"toolgroup '{group_id}' is registered with other settings; unregister it first")
        return existing

    def _check_provider(self, group: ToolGroup) -> None:
        if group.provider_id == MCP_PROVIDER:
            if group.mcp_endpoint is None:
                raise InvalidRequestError("a model-context-protocol toolgroup needs an mcp_endpoint", "mcp_endpoint")
            if not group.mcp_endpoint.uri.startswith(("http://", "https://")):
                raise InvalidRequestError("mcp_endpoint.uri must be an http(s) URL", "mcp_endpoint.uri")
            self._pool("provider_id")
            return
        if group.mcp_endpoint is not None:
            raise InvalidRequestError(f"mcp_endpoint needs provider_id '{MCP_PROVIDER}'", "mcp_endpoint")
        if not self._registry.is_builtin(group.provider_id):
            known = ", ".join([MCP_PROVIDER, *(g.identifier for g in self._registry.groups())])
            raise InvalidRequestError(f"unknown provider_id '{group.provider_id}'; known: {known}", "provider_id")

    def _pool(self, field: str) -> McpClientPool:
        """The MCP sessions, or InvalidRequestError naming ``field`` when this server has no MCP client."""
        if self._mcp is None:
            raise InvalidRequestError("this server has no MCP client", field)
        return self._mcp

    async def get(self, toolgroup_id: str) -> ToolGroup:
        """One toolgroup (builtin, or registered and readable), or NotFoundError."""
        if self._registry.is_builtin(toolgroup_id):
            return self._registry.get_group(toolgroup_id)
        return await self._groups.get(current_principal.get(), toolgroup_id)

    async def list_groups(self) -> list[ToolGroup]:
        """The builtin groups, then the registered ones the caller may read, in registration order."""
        return [*self._registry.groups(), *await self._groups.list(current_principal.get())]

    async def unregister(self, toolgroup_id: str) -> None:
        """Forget a registration; agents that name it fail their next turn.

        Raises:
            InvalidRequestError: the group is builtin.
            NotFoundError: no such registration (for the caller).
        """
        if self._registry.is_builtin(toolgroup_id):
            raise InvalidRequestError(
                f"toolgroup '{toolgroup_id}' is builtin; it cannot be unregistered", "toolgroup_id"
            )
        if not await self._groups.delete(current_principal.get(), toolgroup_id):
            raise NotFoundError(f"toolgroup '{toolgroup_id}' not found")

    # ---- the registry's source ---------------------------------------------

    async def has_group(self, toolgroup_id: str) -> bool:
        """Whether a registration of that id exists for the caller."""
        return await self._groups.find(current_principal.get(), toolgroup_id) is not None

    async def group_tools(self, toolgroup_id: str, provider_data: dict[str, Any] | None) -> list[ServerTool] | None:
        """The tools of a registered group (an MCP server's are listed now), or None if there is none.

        Raises:
            ToolsUnlistedError: the group's MCP server cannot list its tools now (down, slow, failing, its host
                unresolvable or refused by the fetch policy).
        """
        group = await self._groups.find(current_principal.get(), toolgroup_id)
        return None if group is None else await self._tools_of(group, provider_data)

    async def _tools_of(self, group: ToolGroup, provider_data: dict[str, Any] | None) -> list[ServerTool]:
        if group.mcp_endpoint is None:
            builtin = self._registry.builtin_tools(group.provider_id)
            return [AliasedTool(tool, group.identifier, dict(group.args or {})) for tool in builtin]
        uri = group.mcp_endpoint.uri
        try:
            pool = self._pool("toolgroups")
            listed = await pool.list_tools(provider_endpoint(uri, provider_data))
        except (UpstreamError, InvalidRequestError) as exc:
            # The group was registered earlier; that its server cannot be reached now is no fault of the request.
            raise ToolsUnlistedError(group.identifier, exc.message) from exc
        return [McpTool(pool, tool, group.identifier, from_provider_data(uri)) for tool in listed]

    # ---- tools -------------------------------------------------------------

    async def tools(self, toolgroup_id: str | None, provider_data: dict[str, Any] | None) -> list[Tool]:
        """The tools of one group, or of every group the caller may read.

        Listing every group skips (and logs) the MCP servers that cannot answer now.
        """
        if toolgroup_id is not None:
            return [tool.definition for tool in await self._one_group(toolgroup_id, provider_data)]
        listed = self._registry.tools()
        for group in await self._groups.list(current_principal.get()):
            listed.extend(tool.definition for tool in await self._reachable_tools(group, provider_data))
        return listed

    async def _one_group(self, toolgroup_id: str, provider_data: dict[str, Any] | None) -> list[ServerTool]:
        """A group's tools; ``group/tool`` (as agents name one tool) gives that tool alone."""
        tools = await self._group(toolgroup_id, provider_data)
        if tools is not None:
            return tools
        group_id, _, tool_name = toolgroup_id.rpartition("/")
        picked = [t for t in await self._group(group_id, provider_data) or [] if t.definition.identifier == tool_name]
        if not picked:
            raise NotFoundError(f"toolgroup '{toolgroup_id}' not found")
        return picked

    async def _group(self, toolgroup_id: str, provider_data: dict[str, Any] | None) -> list[ServerTool] | None:
        if self._registry.is_builtin(toolgroup_id):
            return self._registry.builtin_tools(toolgroup_id)
        return await self.group_tools(toolgroup_id, provider_data) if toolgroup_id else None

    async def _reachable_tools(self, group: ToolGroup, provider_data: dict[str, Any] | None) -> list[ServerTool]:
        try:
            return await self._tools_of(group, provider_data)
        except ToolsUnlistedError as exc:
            log.warning("tools of toolgroup %s not listed: %s", group.identifier, exc.reason)
            return []

    async def tool(self, tool_name: str, provider_data: dict[str, Any] | None) -> ServerTool:
        """A tool by name: a builtin one, else the first of the registered groups' (in registration order).

        Raises:
            NotFoundError: no group the caller may read has that tool.
        """
        try:
            return self._registry.get_tool(tool_name)
        except NotFoundError:
            pass
        for group in await self._groups.list(current_principal.get()):
            for tool in await self._reachable_tools(group, provider_data):
                if tool.definition.identifier == tool_name:
                    return tool
        raise NotFoundError(f"tool '{tool_name}' not found")

    async def runtime_tools(
        self, toolgroup_id: str | None, mcp_uri: str | None, provider_data: dict[str, Any] | None
    ) -> list[ToolDef]:
        """Tool definitions, as ``/tool-runtime/list-tools`` gives them: of a group, or of an MCP server by URL.

        Raises:
            InvalidRequestError: neither is named, or the server has no MCP client.
        """
        if mcp_uri:
            return await self._pool("mcp_endpoint").list_tools(provider_endpoint(mcp_uri, provider_data))
        if not toolgroup_id:
            raise InvalidRequestError("tool_group_id or mcp_endpoint is required", "tool_group_id")
        return [BoundTool(tool).as_tool_def() for tool in await self._one_group(toolgroup_id, provider_data)]

    async def invoke(
        self, tool_name: str, arguments: dict[str, Any], provider_data: dict[str, Any] | None
    ) -> ToolInvocationResult:
        """Run a tool outside any turn, in the request's tool context (its provider data; no session)."""
        tool = await self.tool(tool_name, provider_data)
        token = tool_context.set(ToolContext(provider_data=dict(provider_data or {})))
        try:
            return await tool.invoke(arguments)
        finally:
            tool_context.reset(token)
