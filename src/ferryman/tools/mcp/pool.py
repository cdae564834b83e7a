"""Pooled MCP sessions: one per server, transport and set of credentials, reused across calls.

Failures never hang a turn: connecting and each request are bounded by
timeouts, and :meth:`McpClientPool.call_tool` returns a failure as an error
result instead of raising it. A pooled connection that turns out to be broken
is dropped and the request is tried once more on a fresh one (the server may
have restarted since the connection was opened).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, Field

from ferryman.api.content import ToolDef
from ferryman.api.registry import ToolInvocationResult
from ferryman.errors import InvalidRequestError, UpstreamError
from ferryman.safe_fetch import FetchPolicy

from .endpoint import McpEndpoint, check_url

if TYPE_CHECKING:
    from mcp import Client

    from .connection import McpConnection

# The SDK (``mcp``, ``mcp_types``: about 20 MiB) and the modules over it are imported by the first request
# to an MCP server, not with the pool: a server whose clients never name one never loads them.

log = logging.getLogger(__name__)

T = TypeVar("T")

_LIST_PAGES = 100
"""Pages of a tool listing followed at most: a server whose cursor never ends cannot hang a call."""


class McpSettings(BaseModel):
    """How long MCP connections and calls may take.

    Attributes:
        timeout_seconds: One request (listing tools, calling one), from sending it to its answer.
        connect_timeout_seconds: Opening a connection and its MCP session.
        idle_seconds: Unused time after which a pooled connection is closed.
    """

    timeout_seconds: float = Field(default=60.0, gt=0)
    connect_timeout_seconds: float = Field(default=10.0, gt=0)
    idle_seconds: float = Field(default=300.0, gt=0)


class McpClientPool:
    """Sessions with MCP servers, shared by every call with the same server and credentials.

    Args:
        policy: Which hosts a client-named server URL may reach (the config's ``fetch:`` section).
        settings: Timeouts.
    """

    def __init__(self, policy: FetchPolicy, settings: McpSettings | None = None) -> None:
        self._policy = policy
        self._settings = settings or McpSettings()
        self._connections: dict[tuple[str, str, str], McpConnection] = {}
        self._opening: dict[tuple[str, str, str], asyncio.Lock] = {}
        self._closed = False

    @property
    def settings(self) -> McpSettings:
        """The pool's timeouts."""
        return self._settings

    def connection(self, endpoint: McpEndpoint) -> McpConnection | None:
        """The open pooled connection to ``endpoint`` with its credentials, if any."""
        connection = self._connections.get(endpoint.key)
        return connection if connection is not None and not connection.closed else None

    async def list_tools(self, endpoint: McpEndpoint) -> list[ToolDef]:
        """The tools the server offers, with each one's raw JSON schema in ``input_schema``.

        Raises:
            InvalidRequestError: the URL is refused by the fetch policy or invalid.
            UpstreamError: the server is unreachable, too slow or answered with an error.
        """
        tools = await self._run(endpoint, _list_all_tools, "listing its tools")
        from .convert import tool_def

        return [tool_def(tool) for tool in tools]

    async def call_tool(self, endpoint: McpEndpoint, name: str, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Call one tool; every failure (refused URL, server down, slow or failing) is an error result."""
        try:
            result = await self._run(endpoint, lambda client: client.call_tool(name, arguments), f"calling {name}")
        except (InvalidRequestError, UpstreamError) as exc:
            return ToolInvocationResult(error_message=exc.message)
        from .convert import invocation_result

        return invocation_result(result)

    async def close(self) -> None:
        """Close every connection (the app is shutting down); the pool opens no new ones."""
        self._closed = True
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(connection.close() for connection in connections))

    async def _run(self, endpoint: McpEndpoint, operation: Callable[[Client], Awaitable[T]], doing: str) -> T:
        from mcp import MCPError

        from .connection import ConnectionLostError

        shown = endpoint.display_url
        for attempt in range(2):
            connection = await self._connection(endpoint)
            try:
                return await connection.request(_closing_as_lost(operation))
            except TimeoutError as exc:
                seconds = self._settings.timeout_seconds
                raise UpstreamError(f"the MCP server {shown} did not answer {doing} within {seconds:g} s") from exc
            except ConnectionLostError as exc:
                await self._drop(connection)
                if attempt or not connection.reused:
                    raise UpstreamError(f"the MCP server {shown} failed while {doing}: {exc}") from exc
                log.info("MCP connection to %s was broken; retrying on a new one", shown)
            except MCPError as exc:
                raise UpstreamError(f"the MCP server {shown} refused {doing}: {exc.error.message}") from exc
            except Exception as exc:  # the SDK's transport or validation failure surfaces here, any type
                await self._drop(connection)
                raise UpstreamError(f"the MCP server {shown} failed while {doing}: {type(exc).__name__}") from exc
        raise AssertionError("unreachable: the second attempt returns or raises")

    async def _connection(self, endpoint: McpEndpoint) -> McpConnection:
        if self._closed:
            raise UpstreamError("the MCP client pool is closed (the server is shutting down)")
        key = endpoint.key
        lock = self._opening.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                existing = self._connections.get(key)
                if existing is not None and not existing.closed:
                    existing.reused = True
                    return existing
                return await self._open(endpoint)
        finally:
            self._release(key)

    async def _open(self, endpoint: McpEndpoint) -> McpConnection:
        from .connection import ConnectionLostError, ConnectionTimeouts, McpConnection

        target = await check_url(endpoint.url, self._policy)
        settings = self._settings
        timeouts = ConnectionTimeouts(settings.connect_timeout_seconds, settings.timeout_seconds, settings.idle_seconds)
        connection = McpConnection(endpoint, target, timeouts, self._forget)
        self._connections[endpoint.key] = connection
        try:
            await connection.wait_ready()
        except TimeoutError as exc:
            seconds = settings.connect_timeout_seconds
            raise UpstreamError(
                f"could not connect to the MCP server {endpoint.display_url} within {seconds:g} s"
            ) from exc
        except ConnectionLostError as exc:
            raise UpstreamError(f"could not connect to the MCP server {endpoint.display_url}: {exc}") from exc
        return connection

    def _forget(self, connection: McpConnection) -> None:
        key = connection.endpoint.key
        if self._connections.get(key) is connection:
            del self._connections[key]
        self._release(key)

    def _release(self, key: tuple[str, str, str]) -> None:
        """Forget the opening lock of ``key`` unless it guards a connection or someone holds it."""
        # Clients name endpoints and credentials freely: a lock per failed endpoint would pile up.
        lock = self._opening.get(key)
        if lock is not None and not lock.locked() and key not in self._connections:
            del self._opening[key]

    async def _drop(self, connection: McpConnection) -> None:
        self._forget(connection)
        await connection.close()


def _closing_as_lost(operation: Callable[[Client], Awaitable[T]]) -> Callable[[Client], Awaitable[T]]:
    """``operation``, with the SDK's "connection closed" error raised as the loss of the connection."""
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED

    from .connection import ConnectionLostError

    async def run(client: Client) -> T:
        try:
            return await operation(client)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise ConnectionLostError(exc.error.message) from exc
            raise

    return run


async def _list_all_tools(client: Client) -> list[Any]:
    result = await client.list_tools()
    tools = list(result.tools)
    for _ in range(_LIST_PAGES):
        if not result.next_cursor:
            break
        result = await client.list_tools(cursor=result.next_cursor)
        tools.extend(result.tools)
    return tools
