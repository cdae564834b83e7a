"""A lean HTTP/1.1 client for the one request a turn makes per inference: a streamed ``POST`` to the model server.

Why not the ``openai`` SDK (over httpx) here: measured side by side against the bench's stub
(``bench/model_client.py``), the SDK spent about 1 ms of CPU per streamed chat completion, httpx alone as much,
and this client a fifth of it; a one-step turn's server CPU is a few milliseconds in all. It speaks what the hot
path needs and no more: one request at a time per connection, connections kept alive and reused, a body sent
whole, an answer read as it arrives (sized or chunked), TLS from the standard library. ``httptools`` (llhttp,
uvicorn's parser) reads the answers. The model list, which every start asks for, is a ``GET`` here too, so
that a server that only chats never imports the SDK (about 16 MiB resident). Everything else a model server is
asked (embeddings, requests passed through as clients wrote them) still goes through the SDK, as do servers
reached through a proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import httptools

MAX_IDLE = 64
"""Idle connections kept per server (more are closed as they come back)."""
READ_SIZE = 65536


class RemoteClosedError(ConnectionError):
    """The server closed the connection before its answer was complete."""


@dataclass
class _Parsed:
    """What the parser read of one answer so far (httptools calls these methods)."""

    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    pieces: list[bytes] = field(default_factory=list)
    head_done: bool = False
    keep_alive: bool = False
    framed: bool = False
    complete: bool = False
    parser: httptools.HttpResponseParser | None = None

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        self.headers.append((name, value))
        if name in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_headers_complete(self) -> None:
        self.head_done = True
        # Asked now: once the message is complete, the parser has forgotten it.
        self.keep_alive = self.parser is not None and self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self.pieces.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


def _parsing() -> tuple[_Parsed, httptools.HttpResponseParser]:
    """A parser for one answer, and what it reads."""
    parsed = _Parsed()
    parsed.parser = httptools.HttpResponseParser(parsed)
    return parsed, parsed.parser


class _Connection:
    """One open connection to the server, carrying one exchange at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, read_timeout: float) -> None:
        self._reader, self._writer = reader, writer
        self._read_timeout = read_timeout
        self.received = 0
        self._parsed, self._parser = _parsing()

    async def send(self, request: bytes) -> None:
        """Write a whole request and start reading a fresh answer."""
        self._parsed, self._parser = _parsing()
        self.received = 0
        self._writer.write(request)
        await self._writer.drain()

    async def _feed(self) -> None:
        async with asyncio.timeout(self._read_timeout):
            data = await self._reader.read(READ_SIZE)
        if not data:
            if self._parsed.head_done and not self._parsed.framed:
                self._parsed.complete = True  # a body without a length nor chunks ends with its connection
                return
            raise RemoteClosedError("the model server closed the connection")
        self.received += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            raise RemoteClosedError(f"the model server answered in a form that is not HTTP/1.1: {exc}") from exc

    async def head(self) -> tuple[int, dict[str, str]]:
        """The answer's status and headers (names in lower case; a repeated header's last value)."""
        while not self._parsed.head_done:
            await self._feed()
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in self._parsed.headers}
        return self._parser.get_status_code(), headers

    async def body(self) -> AsyncIterator[bytes]:
        """The answer's body, piece by piece as it arrives."""
        parsed = self._parsed
        while True:
            if parsed.pieces:
                pieces, parsed.pieces = parsed.pieces, []
                for piece in pieces:
                    yield piece
            if parsed.complete:
                return
            await self._feed()

    @property
    def reusable(self) -> bool:
        """Whether the answer was read whole and the server keeps the connection open."""
        return self._parsed.complete and self._parsed.keep_alive and not self._reader.at_eof()

    def close(self) -> None:
        """Close the connection (without waiting)."""
        self._writer.close()

    async def aclose(self) -> None:
        """Close the connection and wait until it is."""
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()


@dataclass(frozen=True)
class Answer:
    """A streamed answer: its status and headers, then its body with :meth:`chunks` (read at most once)."""

    status: int
    headers: dict[str, str]
    _connection: _Connection

    def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives."""
        return self._connection.body()

    async def read(self, limit: int) -> bytes:
        """The body whole, cut after ``limit`` bytes (an error answer's: only its start is ever shown)."""
        kept = bytearray()
        async for piece in self.chunks():
            kept += piece[: max(0, limit - len(kept))]
        return bytes(kept)


class Http1Pool:
    """Keep-alive connections to one model server, for streamed JSON ``POST`` requests (and ``GET`` of JSON).

    Args:
        base_url: The server's base URL (``http://`` or ``https://``, with its path prefix, e.g. ``/v1``).
        timeout: Seconds allowed to connect, and between two reads of an answer.
    """

    def __init__(self, base_url: str, timeout: float) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None
        self._prefix = parts.path.rstrip("/")
        default_port = self._port == (443 if self._tls else 80)
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._authority = (host if default_port else f"{host}:{self._port}").encode("ascii")
        self._timeout = timeout
        self._idle: list[_Connection] = []

    def post(self, path: str, body: bytes, headers: Sequence[tuple[str, str]]) -> AbstractAsyncContextManager[Answer]:
        """Send ``body`` to ``path`` (under the base URL's prefix); the answer, its body read inside the block.

        A connection whose answer was read whole goes back to the pool; one left mid-answer is closed.

        Raises:
            ConnectionError: the server could not be reached, or closed the connection mid-answer.
            TimeoutError: connecting, or waiting for the next piece of the answer, took longer than ``timeout``.
        """
        return self._answered(self._request(path, body, headers))

    def get(self, path: str, headers: Sequence[tuple[str, str]]) -> AbstractAsyncContextManager[Answer]:
        """Ask ``path`` (under the base URL's prefix) for JSON; the answer, as :meth:`post` gives it.

        Raises:
            ConnectionError: the server could not be reached, or closed the connection mid-answer.
            TimeoutError: connecting, or waiting for the next piece of the answer, took longer than ``timeout``.
        """
        return self._answered(self._request(path, None, headers))

    @asynccontextmanager
    async def _answered(self, request: bytes) -> AsyncIterator[Answer]:
        connection, answer = await self._exchange(request)
        try:
            yield answer
        except BaseException:
            connection.close()
            raise
        if connection.reusable and len(self._idle) < MAX_IDLE:
            self._idle.append(connection)
        else:
            connection.close()

    async def _exchange(self, request: bytes) -> tuple[_Connection, Answer]:
        """Send on an idle connection, or a new one when none is idle or the idle one was closed by the server."""
        while self._idle:
            connection = self._idle.pop()
            try:
                return connection, await _sent(connection, request)
            except TimeoutError:
                raise
            except OSError:
                if connection.received:
                    raise
                # A server may close an idle connection as we reuse it: nothing was answered, send again.
        connection = await self._open()
        return connection, await _sent(connection, request)

    async def _open(self) -> _Connection:
        async with asyncio.timeout(self._timeout):
            reader, writer = await asyncio.open_connection(
                self._host, self._port, ssl=self._tls, server_hostname=self._host if self._tls else None
            )
        return _Connection(reader, writer, self._timeout)

    def _request(self, path: str, body: bytes | None, headers: Sequence[tuple[str, str]]) -> bytes:
        """A ``POST`` of ``body`` whose answer streams events, or without a body a ``GET`` of JSON."""
        target = (self._prefix + path).encode("ascii")
        if body is None:
            lines = [b"GET " + target + b" HTTP/1.1", b"Host: " + self._authority, b"Accept: application/json"]
        else:
            lines = [
                b"POST " + target + b" HTTP/1.1",
                b"Host: " + self._authority,
                b"Content-Type: application/json",
                b"Accept: text/event-stream",
                b"Content-Length: " + str(len(body)).encode("ascii"),
            ]
        for name, value in headers:
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise ValueError(f"header {name!r} holds a line break")
            lines.append(f"{name}: {value}".encode("latin-1"))
        return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")

    async def aclose(self) -> None:
        """Close every idle connection."""
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.aclose()


async def _sent(connection: _Connection, request: bytes) -> Answer:
    """The answer to ``request`` sent on ``connection`` (closed if that fails)."""
    try:
        await connection.send(request)
        status, headers = await connection.head()
    except BaseException:
        connection.close()
        raise
    return Answer(status, headers, connection)


def proxied(base_url: str) -> bool:
    """Whether the environment sends requests to ``base_url`` through a proxy (which this client does not speak)."""
    parts = urlsplit(base_url)
    proxies = getproxies()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    return not proxy_bypass(parts.netloc)


async def sse_data(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """The ``data`` of each server-sent event in a body (its lines joined), in order; comments and other fields
    are skipped."""
    pending = b""
    data: list[bytes] = []
    async for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            line = line.rstrip(b"\r")
            if not line:
                if data:
                    yield b"\n".join(data).decode("utf-8")
                    data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
    if data:
        yield b"\n".join(data).decode("utf-8")
