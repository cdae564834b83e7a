"""Real MCP servers (the official SDK's ``MCPServer``, FastMCP's successor) for the tests, run as subprocesses.

``python tests/mcp_servers.py --transport streamable_http --port 0`` serves the
test tools on 127.0.0.1 and prints ``READY <url>`` once it accepts connections,
so a test waits on that line, never on a sleep. :func:`start_mcp_server` starts
one and :func:`stop_mcp_server` ends it. The session-scoped fixtures
``mcp_http_server`` and ``mcp_sse_server`` (one process each per test worker,
started on first use) are imported by ``tests/conftest.py``. The servers are on
127.0.0.1, which the fetch policy refuses by default: a test allows it with
:data:`LOCAL_FETCH` (``FetchPolicy(allowed_hosts=["127.0.0.1"])``).

Tools: ``add(a, b)``, ``echo(text)``, ``whoami()`` (the ``X-Test-Token`` header
the request carried, proving credentials reach the server), ``fail()`` (raises),
``hang()`` (never returns), ``picture()`` (an image), ``document()`` (an embedded
text resource).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import mcp_types
import pytest
from mcp.server.mcpserver import Context, MCPServer

from ferryman.safe_fetch import FetchPolicy

TOKEN_HEADER = "x-test-token"
PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
Transport = Literal["streamable_http", "sse"]
_PATHS: dict[Transport, str] = {"streamable_http": "/mcp", "sse": "/sse"}
_REPO = Path(__file__).resolve().parent.parent
LOCAL_FETCH = FetchPolicy(allowed_hosts=["127.0.0.1"])
"""A fetch policy that lets the server reach the test MCP servers."""


def build_server() -> MCPServer:
    """The test server with its tools."""
    server = MCPServer("ferryman-test", log_level="CRITICAL")

    @server.tool(annotations=mcp_types.ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def whoami(ctx: Context) -> str:
        """The test token header the request carried."""
        headers = ctx.headers or {}
        return headers.get(TOKEN_HEADER, "anonymous")

    @server.tool()
    def connection(ctx: Context) -> str:
        """The client's TCP port: requests of one pooled client reuse its kept-alive connection."""
        request = ctx.request_context.request
        peer = getattr(request, "client", None)
        return str(peer.port) if peer is not None else "unknown"

    @server.tool()
    def fail() -> str:
        """Always fails."""
        raise RuntimeError("the tool failed on purpose")

    @server.tool()
    async def hang() -> str:
        """Never returns."""
        await asyncio.Event().wait()
        return "unreachable"

    @server.tool()
    def picture() -> list[mcp_types.ContentBlock]:
        """A one-pixel image with a caption."""
        data = base64.b64encode(PIXEL_PNG).decode()
        return [
            mcp_types.TextContent(type="text", text="a pixel"),
            mcp_types.ImageContent(type="image", data=data, mime_type="image/png"),
        ]

    @server.tool()
    def document() -> mcp_types.EmbeddedResource:
        """An embedded text resource."""
        contents = mcp_types.TextResourceContents(uri="memo://one", mime_type="text/plain", text="the memo")
        return mcp_types.EmbeddedResource(type="resource", resource=contents)

    return server


class _AnnouncingServer:
    """A uvicorn server that prints its URL once it listens (the port may have been chosen by the OS)."""

    def __init__(self, config: Any, path: str) -> None:
        import uvicorn

        class Server(uvicorn.Server):
            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets)
                bound = self.servers[0].sockets[0].getsockname()[1]
                sys.stdout.write(f"READY http://127.0.0.1:{bound}{path}\n")
                sys.stdout.flush()

        self.server = Server(config)


async def _serve(transport: Transport, port: int) -> None:
    import uvicorn

    server = build_server()
    app = server.streamable_http_app() if transport == "streamable_http" else server.sse_app()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    await _AnnouncingServer(config, _PATHS[transport]).server.serve()


@dataclass
class RunningServer:
    """A test MCP server running in a subprocess."""

    process: subprocess.Popen[str]
    url: str
    transport: Transport
    port: int


def start_mcp_server(transport: Transport, port: int = 0, timeout: float = 30.0) -> RunningServer:
    """Start a test server and return once it accepts connections.

    Raises:
        RuntimeError: the server did not report ready within ``timeout``.
    """
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--transport", transport, "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=_REPO,
    )
    line = _first_line(process, timeout)
    if not line.startswith("READY "):
        process.kill()
        process.wait()
        raise RuntimeError(f"the test MCP server did not start: {line!r}")
    url = line.split(" ", 1)[1].strip()
    return RunningServer(process, url, transport, int(url.rsplit(":", 1)[1].split("/", 1)[0]))


def _first_line(process: subprocess.Popen[str], timeout: float) -> str:
    assert process.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline() if process.stdout else ""))
    reader.start()
    reader.join(timeout)
    return lines[0] if lines else ""


def stop_mcp_server(server: RunningServer) -> None:
    """Kill a test server and reap it."""
    server.process.kill()
    server.process.wait()
    if server.process.stdout is not None:
        server.process.stdout.close()


@pytest.fixture(scope="session")
def mcp_http_server() -> Iterator[RunningServer]:
    """A test MCP server over streamable HTTP, for the whole test session."""
    server = start_mcp_server("streamable_http")
    yield server
    stop_mcp_server(server)


@pytest.fixture(scope="session")
def mcp_sse_server() -> Iterator[RunningServer]:
    """A test MCP server over SSE, for the whole test session."""
    server = start_mcp_server("sse")
    yield server
    stop_mcp_server(server)


def main(argv: list[str] | None = None) -> None:
    """Run one test server until killed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=list(_PATHS), default="streamable_http")
    parser.add_argument("--port", type=int, default=0)
    args: Any = parser.parse_args(argv)
    asyncio.run(_serve(args.transport, args.port))


if __name__ == "__main__":
    main()
