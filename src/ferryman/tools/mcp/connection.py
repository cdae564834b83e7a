"""One live MCP session, owned by one task.

The SDK's transports and ``Client`` are anyio context managers whose cancel
scopes must be exited by the task that entered them, so a connection is a task
of its own: it opens the transport and the session, then serves requests from
a queue, each in a child task of its task group (so a hanging tool does not
hold up the others), and closes everything itself when it has been idle for a
while, when the pool closes it, or when the transport fails. Callers only
enqueue and wait on a future; giving up on the future (a timeout) cancels the
request's child task.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry import context as otel_context

from ferryman.logs import redacted_url

from .endpoint import CheckedTarget, McpEndpoint
from .pinned import pinned_client

log = logging.getLogger(__name__)

T = TypeVar("T")
Operation = Callable[[Client], Awaitable[Any]]

_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")
"""A URL quoted in an error message."""

_STREAM_READ_SECONDS = 300.0
"""How long an open event stream may stay silent before the transport gives it up (the SDK's default)."""


class ConnectionLostError(Exception):
    """The connection closed or failed before the request was answered."""


@dataclass(frozen=True)
class ConnectionTimeouts:
    """How long a connection waits.

    Attributes:
        connect: Opening the transport and the MCP session.
        request: One request, from queueing it to its answer.
        idle: Unused time after which the connection closes itself.
    """

    connect: float
    request: float
    idle: float


@dataclass
class _Request:
    operation: Operation
    future: asyncio.Future[Any]
    trace: otel_context.Context = field(default_factory=otel_context.get_current)
    """The caller's trace context: the request is sent in it (the SDK puts its ``traceparent`` in ``_meta``)."""


class McpConnection:
    """An MCP session with one server, for one set of credentials."""

    def __init__(
        self,
        endpoint: McpEndpoint,
        target: CheckedTarget,
        timeouts: ConnectionTimeouts,
        on_closed: Callable[[McpConnection], None],
    ) -> None:
        self.endpoint = endpoint
        self.reused = False
        self._target = target
        self._timeouts = timeouts
        self._on_closed = on_closed
        self._queue: asyncio.Queue[_Request] = asyncio.Queue()
        self._pending: set[asyncio.Future[Any]] = set()
        self._closed = False
        loop = asyncio.get_running_loop()
        self._ready: asyncio.Future[str] = loop.create_future()
        # A fresh context: the task outlives the request that opened it and must not carry its context.
        self._task = loop.create_task(self._own(), context=contextvars.Context())

    @property
    def closed(self) -> bool:
        """Whether the connection stopped serving requests."""
        return self._closed

    async def wait_ready(self) -> str:
        """Wait until the session is open; the transport it uses.

        Raises:
            TimeoutError: it did not open within the connect timeout (the connection is then closed).
            ConnectionLostError: it could not be opened.
        """
        try:
            async with asyncio.timeout(self._timeouts.connect):
                return await asyncio.shield(self._ready)
        except TimeoutError:
            await self.close()
            raise

    async def request(self, operation: Callable[[Client], Awaitable[T]]) -> T:
        """Run ``operation`` on the session, within the request timeout.

        Raises:
            TimeoutError: no answer in time (the request is then cancelled).
            ConnectionLostError: the connection closed first.
            Exception: whatever the operation raised (an ``MCPError`` from the server, say).
        """
        if self._closed:
            raise ConnectionLostError("the connection is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        self._queue.put_nowait(_Request(operation, future))
        async with asyncio.timeout(self._timeouts.request):
            return await future

    async def wait_closed(self) -> None:
        """Wait until the connection has closed (idle, failed or closed by the pool)."""
        await asyncio.wait({self._task})

    async def close(self) -> None:
        """Close the session and wait until the owning task has let go of it."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _own(self) -> None:
        failure: BaseException | None = None
        try:
            async with self._session() as (client, transport):
                self._ready.set_result(transport)
                await self._serve(client)
        except Exception as exc:  # the transport's failure, reported to whoever waits
            failure = exc
            log.info("MCP connection to %s ended: %s", self.endpoint.display_url, _describe(exc))
        finally:
            self._closed = True
            self._on_closed(self)
            self._fail_waiting(failure)

    async def _serve(self, client: Client) -> None:
        async with anyio.create_task_group() as group:
            while True:
                try:
                    async with asyncio.timeout(self._timeouts.idle):
                        request = await self._queue.get()
                except TimeoutError:
                    if not self._pending:
                        break
                    continue
                group.start_soon(self._answer, client, request)
            # Closing after an idle spell: mark closed before yielding, so no new request is queued here.
            self._closed = True
            group.cancel_scope.cancel()

    @staticmethod
    async def _answer(client: Client, request: _Request) -> None:
        future = request.future
        if future.done():
            return
        traced = otel_context.attach(request.trace)  # this child task's own context: detached as it ends
        try:
            with anyio.CancelScope() as scope:
                future.add_done_callback(lambda done: scope.cancel() if done.cancelled() else None)
                try:
                    result = await request.operation(client)
                except Exception as exc:
                    if not future.done():
                        future.set_exception(exc)
                else:
                    if not future.done():
                        future.set_result(result)
        finally:
            otel_context.detach(traced)

    def _fail_waiting(self, failure: BaseException | None) -> None:
        reason = f"the MCP connection closed: {_describe(failure)}" if failure else "the MCP connection closed"
        if not self._ready.done():
            self._ready.set_exception(ConnectionLostError(reason))
        # Nobody may await the ready future (the caller timed out): retrieve it so asyncio does not warn.
        if not self._ready.cancelled():
            self._ready.exception()
        while not self._queue.empty():
            self._pending.add(self._queue.get_nowait().future)
        for future in list(self._pending):
            if not future.done():
                future.set_exception(ConnectionLostError(reason))

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[tuple[Client, str]]:
        transport = self.endpoint.transport
        if transport != "auto":
            async with self._open(transport) as client:
                yield client, transport
            return
        try:
            stack = contextlib.AsyncExitStack()
            client = await stack.enter_async_context(self._open("streamable_http"))
        except Exception as exc:
            log.debug("MCP %s: streamable HTTP failed (%s), trying SSE", self.endpoint.display_url, _describe(exc))
            async with self._open("sse") as client:
                yield client, "sse"
            return
        async with stack:
            yield client, "streamable_http"

    @contextlib.asynccontextmanager
    async def _open(self, transport: str) -> AsyncIterator[Client]:
        timeout = httpx2.Timeout(self._timeouts.connect, read=_STREAM_READ_SECONDS)
        headers = self.endpoint.headers
        if transport == "sse":

            def factory(
                headers: dict[str, str] | None = None,
                timeout: httpx2.Timeout | None = None,
                auth: httpx2.Auth | None = None,
            ) -> httpx2.AsyncClient:
                return pinned_client(self._target, headers or {}, timeout or httpx2.Timeout(self._timeouts.connect))

            streams = sse_client(
                self.endpoint.url,
                headers=dict(headers),
                timeout=self._timeouts.connect,
                sse_read_timeout=_STREAM_READ_SECONDS,
                httpx_client_factory=factory,
            )
            async with Client(streams, cache=None) as client:
                yield client
            return
        async with pinned_client(self._target, headers, timeout) as http:
            async with Client(streamable_http_client(self.endpoint.url, http_client=http), cache=None) as client:
                yield client


def _describe(exc: BaseException | None) -> str:
    """An exception in a few words, with the leaves of an exception group (the SDK's task groups raise them).

    Clients and models read it: its first line only, every URL in it without user info or query
    (an HTTP error quotes the URL it requested, credentials and all).
    """
    if exc is None:
        return "no error"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    text = next(iter(str(exc).splitlines()), "")
    text = _URL.sub(lambda found: redacted_url(found.group()), text)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
