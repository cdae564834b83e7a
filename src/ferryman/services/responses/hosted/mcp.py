"""``mcp`` on the Responses API: a remote MCP server's tools, its ``mcp_list_tools`` and ``mcp_call`` items.

A server's tools are listed once per conversation (or ``previous_response_id``
chain): the first response that offers the server emits an ``mcp_list_tools``
item, and later ones reuse the latest such item the conversation or chain holds
for the same ``server_label`` (a listing that failed is not reused). The
request's ``headers`` and ``authorization`` reach the server and nothing else:
the response stores and echoes the tool without them (``McpTool.without_credentials``).
"""

from __future__ import annotations

import asyncio

from ferryman.api.content import ToolCall, ToolDef, ToolResponse
from ferryman.api.response_events import (
    McpCallArgumentsDelta,
    McpCallArgumentsDone,
    McpCallCompleted,
    McpCallFailed,
    McpCallInProgress,
    McpListToolsCompleted,
    McpListToolsFailed,
    McpListToolsInProgress,
)
from ferryman.api.responses import (
    HostedCallItem,
    HostedTool,
    Item,
    McpCallItem,
    McpListedTool,
    McpListToolsItem,
    McpToolFilter,
)
from ferryman.api.responses import McpTool as McpRequestTool
from ferryman.engine.approvals import ApprovalPolicy
from ferryman.engine.unlisted import UnlistedTools
from ferryman.errors import InvalidRequestError, UpstreamError
from ferryman.inference.openai_wire import parse_arguments
from ferryman.tools.mcp import McpClientPool, McpEndpoint, McpTool, fixed
from ferryman.tools.mcp.convert import ANNOTATIONS, parameters
from ferryman.tools.registry import BoundTool

from ..citations import Sources
from ..ids import new_item_id
from .base import Announced, BindContext, Binding, Progress, Replayed, failed, output_text, replayed_call

_ERROR_PREFIX = "error: "
"""How the engine's error responses start (``engine/tool_step.py``)."""


class McpCallRenderer:
    """A call of one MCP tool: its arguments, then its output or its error.

    Args:
        server_label: The server's label in the request.
        name: The tool's name on the server (the model may know it by a prefixed name).
    """

    item_type = "mcp_call"

    def __init__(self, server_label: str, name: str) -> None:
        self._server_label = server_label
        self._name = name

    def started(self, call: ToolCall, item_id: str) -> tuple[HostedCallItem, list[Progress]]:
        """An item in progress; its arguments come as one delta (the model's call is complete by now)."""
        arguments = call.arguments_json or "{}"
        item = McpCallItem(
            id=item_id, server_label=self._server_label, name=self._name, arguments=arguments, status="in_progress"
        )
        progress: list[Progress] = [
            (McpCallArgumentsDelta, {"delta": arguments}),
            (McpCallArgumentsDone, {"arguments": arguments}),
            (McpCallInProgress, {}),
        ]
        return item, progress

    def finished(
        self, item: HostedCallItem, response: ToolResponse, sources: Sources
    ) -> tuple[HostedCallItem, list[Progress]]:
        """The tool's output, or why it failed (the model saw the same)."""
        text = output_text(response)
        if failed(response):
            error = {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": _error_text(text)}]}
            return item.model_copy(update={"status": "failed", "error": error}), [(McpCallFailed, {})]
        return item.model_copy(update={"status": "completed", "output": text}), [(McpCallCompleted, {})]


def _error_text(text: str) -> str:
    return text[len(_ERROR_PREFIX) :] if text.startswith(_ERROR_PREFIX) else text


def replay_call(item: McpCallItem) -> Replayed:
    """An ``mcp_call`` as the model read it: the call by the tool's name on the server, its output or error."""
    call = replayed_call(item.id, item.type, item.name, parse_arguments(item.arguments))
    if item.error is not None:
        texts = [str(part.get("text") or "") for part in item.error.get("content") or [] if isinstance(part, dict)]
        return Replayed(call, f"{_ERROR_PREFIX}{' '.join(texts) or 'the MCP tool failed'}")
    if item.output is None:
        return Replayed(call, f"the call of {item.name} on {item.server_label} ended {item.status} without output")
    return Replayed(call, item.output)


def _endpoint(tool: McpRequestTool) -> McpEndpoint:
    """The server with the request's credentials (``authorization`` as a bearer token)."""
    headers = dict(tool.headers or {})
    if tool.authorization:
        headers["Authorization"] = f"Bearer {tool.authorization}"
    return McpEndpoint(url=tool.server_url, transport="auto", headers=headers)


def _allowed(tool: McpRequestTool, listed: McpListedTool) -> bool:
    allowed = tool.allowed_tools
    if allowed is None:
        return True
    if isinstance(allowed, list):
        return listed.name in allowed
    return _passes(allowed, listed)


def _passes(allowed: McpToolFilter, listed: McpListedTool) -> bool:
    if allowed.tool_names is not None and listed.name not in allowed.tool_names:
        return False
    return not allowed.read_only or bool((listed.annotations or {}).get("readOnlyHint"))


def _listed(tool: ToolDef) -> McpListedTool:
    schema = tool.input_schema or {"type": "object", "properties": {}}
    annotations = (tool.metadata or {}).get(ANNOTATIONS)
    return McpListedTool(
        name=tool.name,
        input_schema=schema,
        description=tool.description,
        annotations=annotations if isinstance(annotations, dict) else None,
    )


def _tool_def(listed: McpListedTool) -> ToolDef:
    """A listed tool (perhaps from an earlier ``mcp_list_tools`` item) as the server tool seam takes it."""
    return ToolDef(
        name=listed.name,
        description=listed.description,
        parameters=parameters(listed.input_schema),
        input_schema=listed.input_schema,
        metadata={ANNOTATIONS: listed.annotations} if listed.annotations else None,
    )


class McpKind:
    """The request's ``mcp`` tools: each server's tools, listed once per conversation or chain.

    The model knows a tool by its name on the server. A name that another tool of
    the request also has (a function tool, a hosted tool, or a tool of another
    ``mcp`` server) is prefixed with the server's label and two underscores
    instead, for every server that has it: ``docs__search`` and ``wiki__search``.
    The ``mcp_call`` item names the tool as the server does.

    Args:
        pool: The shared MCP sessions.
    """

    names: frozenset[str] = frozenset()
    uses_prior = True

    def __init__(self, pool: McpClientPool) -> None:
        self._pool = pool

    def validate(self, tools: list[HostedTool]) -> None:
        """Each server has its own label."""
        labels = [tool.server_label for tool in tools if isinstance(tool, McpRequestTool)]
        if len(set(labels)) != len(labels):
            raise InvalidRequestError("each mcp tool needs its own server_label", "tools")

    async def check(self, tools: list[HostedTool]) -> None:
        """Nothing to check before the response: a server that fails shows in its items."""

    async def bind(self, tools: list[HostedTool], context: BindContext) -> Binding:
        """List (or reuse the listing of) each server, and offer its allowed tools."""
        servers = [tool for tool in tools if isinstance(tool, McpRequestTool)]
        earlier = _listings(context.prior)
        binding = Binding()
        listings = await asyncio.gather(*(self._listing(tool, earlier) for tool in servers))
        binding.announced.extend(announced for _, announced, _ in listings if announced is not None)
        binding.unlisted.extend(unlisted for _, _, unlisted in listings if unlisted is not None)
        offered = [
            (server, listed)
            for server, (listing, _, _) in zip(servers, listings, strict=True)
            for listed in listing
            if _allowed(server, listed)
        ]
        counts: dict[str, int] = {}
        for _, listed in offered:
            counts[listed.name] = counts.get(listed.name, 0) + 1
        for server, listed in offered:
            clash = counts[listed.name] > 1 or listed.name in context.taken
            name = f"{server.server_label}__{listed.name}" if clash else listed.name
            tool = McpTool(self._pool, _tool_def(listed), server.server_label, fixed(_endpoint(server)), name)
            bound = BoundTool(tool)
            binding.add(name, bound, McpCallRenderer(server.server_label, listed.name))
            if ApprovalPolicy.of(server.require_approval).requires(listed.name):
                binding.held[name] = server.server_label
        return binding

    async def _listing(
        self, tool: McpRequestTool, earlier: dict[str, McpListToolsItem]
    ) -> tuple[list[McpListedTool], Announced | None, UnlistedTools | None]:
        """The server's tools: listed before in the conversation, or now (with the item that shows it).

        A server that cannot list them now offers none: its item is a failed listing, and the
        failure (the same the Agents API records as a step) is what the model is told.

        Raises:
            InvalidRequestError: the server's URL is refused (the fetch policy) or invalid.
        """
        reused = earlier.get(tool.server_label)
        if reused is not None:
            return reused.tools, None, None
        item_id = new_item_id("mcp_list_tools")
        try:
            listed = [_listed(found) for found in await self._pool.list_tools(_endpoint(tool))]
        except UpstreamError as exc:
            unlisted = UnlistedTools(tool.server_label, exc.message)
            item = McpListToolsItem(id=item_id, server_label=tool.server_label, error=unlisted.reason)
            return [], Announced(item, [(McpListToolsInProgress, {}), (McpListToolsFailed, {})]), unlisted
        item = McpListToolsItem(id=item_id, server_label=tool.server_label, tools=listed)
        return listed, Announced(item, [(McpListToolsInProgress, {}), (McpListToolsCompleted, {})]), None


def _listings(prior: list[Item]) -> dict[str, McpListToolsItem]:
    """The latest successful listing of each server label among earlier items."""
    latest: dict[str, McpListToolsItem] = {}
    for item in prior:
        if isinstance(item, McpListToolsItem) and item.error is None:
            latest[item.server_label] = item
    return latest
