"""Helpers of the ``ferryman.client`` tests: clients on the in-process server, and a connection that breaks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx

from inprocess import Served


class CutAfter(httpx.SyncByteStream):
    """An SSE body that breaks (a read error) after ``events`` whole events, as a dropped connection does."""

    def __init__(self, inner: httpx.SyncByteStream, events: int) -> None:
        self._inner, self._left = inner, events

    def __iter__(self) -> Iterator[bytes]:
        buffer = b""
        for chunk in self._inner:
            buffer += chunk
            while self._left and b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                self._left -= 1
                yield event + b"\n\n"
            if not self._left:
                raise httpx.ReadError("connection reset by peer")

    def close(self) -> None:
        self._inner.close()


class Recorder:
    """Forwards requests to the in-process server, recording them; can cut the first event stream it passes."""

    def __init__(self, model: Served, cut_after: int | None = None) -> None:
        self._inner = model.http_client()
        self._cut_after = cut_after
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self._inner.send(request, stream=True)
        if self._cut_after is not None and response.headers.get("content-type", "").startswith("text/event-stream"):
            events, self._cut_after = self._cut_after, None
            assert isinstance(response.stream, httpx.SyncByteStream)
            return httpx.Response(
                response.status_code, headers=response.headers, stream=CutAfter(response.stream, events)
            )
        return response

    def http_client(self) -> httpx.Client:
        """An ``httpx.Client`` sending through this recorder."""
        return httpx.Client(transport=httpx.MockTransport(self), base_url="http://ferryman")


class AsyncEndAfter(httpx.AsyncByteStream):
    """An SSE body that ends cleanly after ``events`` whole events (a proxy closing an idle stream)."""

    def __init__(self, inner: httpx.AsyncByteStream, events: int) -> None:
        self._inner, self._left = inner, events

    async def __aiter__(self) -> AsyncIterator[bytes]:
        buffer = b""
        async for chunk in self._inner:
            buffer += chunk
            while self._left and b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                self._left -= 1
                yield event + b"\n\n"
            if not self._left:
                return

    async def aclose(self) -> None:
        await self._inner.aclose()


class AsyncCutting(httpx.AsyncBaseTransport):
    """Sends through ``inner``; the first event stream ends early, after ``events`` events."""

    def __init__(self, inner: httpx.AsyncBaseTransport, events: int) -> None:
        self._inner, self._events = inner, events
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = await self._inner.handle_async_request(request)
        if self._events and response.headers.get("content-type", "").startswith("text/event-stream"):
            events, self._events = self._events, 0
            assert isinstance(response.stream, httpx.AsyncByteStream)
            return httpx.Response(response.status_code, headers=response.headers,
                                  stream=AsyncEndAfter(response.stream, events))  # fmt: skip
        return response
