"""Local stand-ins of the search providers' HTTP APIs (Brave, Tavily, SearXNG), served on a real port.

One Starlette app answers all three shapes: Brave's ``GET /res/v1/web/search``
(key in ``X-Subscription-Token``, ``count``), Tavily's ``POST /search`` (key as
a bearer token or ``api_key`` in the body, ``max_results``) and SearXNG's
``GET /search?format=json`` (no key; 403 for another format, as an instance
without JSON output answers). A wrong or missing key is a 401. Some queries
misbehave on purpose: ``slow`` answers after :data:`SLOW_SECONDS`, ``boom`` is a
500, ``busy`` a 429, ``garbage`` not JSON.

:func:`search_standin` runs it with uvicorn in a thread on a socket bound before
the thread starts (so requests queue until it serves, with no wait to guess);
:attr:`StandIn.seen` records each request: provider, key, query, count.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

BRAVE_KEY = "brave-standin-key"
TAVILY_KEY = "tvly-standin-key"
SLOW_SECONDS = 2.0


@dataclass
class StandIn:
    """A running stand-in: its base URL and the requests it answered."""

    url: str
    seen: list[dict[str, Any]] = field(default_factory=list)


def _hits(provider: str, query: str, count: int) -> list[dict[str, str]]:
    return [
        {"title": f"{provider} hit {n} for {query}", "url": f"https://{provider}.example/{n}", "text": f"snippet {n}"}
        for n in range(1, count + 1)
    ]


def _misbehaviour(query: str) -> Response | None:
    if query == "boom":
        return JSONResponse({"error": "internal"}, status_code=500)
    if query == "busy":
        return JSONResponse({"error": "rate limited"}, status_code=429)
    if query == "garbage":
        return PlainTextResponse("<html>not json</html>")
    return None


def build_app(seen: list[dict[str, Any]]) -> Starlette:
    """The stand-in app, recording requests into ``seen``."""

    async def brave(request: Request) -> Response:
        key = request.headers.get("x-subscription-token")
        query = request.query_params.get("q", "")
        count = int(request.query_params.get("count", "20"))
        seen.append({"provider": "brave", "key": key, "query": query, "count": count})
        if key != BRAVE_KEY:
            return JSONResponse({"type": "ErrorResponse", "error": {"status": 401}}, status_code=401)
        if query == "slow":
            await asyncio.sleep(SLOW_SECONDS)
        if (odd := _misbehaviour(query)) is not None:
            return odd
        results = [
            {"title": h["title"], "url": h["url"], "description": f"<strong>{h['text']}</strong> &amp; more"}
            for h in _hits("brave", query, count)
        ]
        return JSONResponse(
            {"type": "search", "query": {"original": query}, "web": {"type": "search", "results": results}}
        )

    async def tavily(request: Request) -> Response:
        body = await request.json()
        authorization = request.headers.get("authorization", "")
        key = authorization.removeprefix("Bearer ") if authorization.startswith("Bearer ") else body.get("api_key")
        query = body.get("query", "")
        count = int(body.get("max_results", 5))
        seen.append({"provider": "tavily", "key": key, "query": query, "count": count})
        if key != TAVILY_KEY:
            return JSONResponse({"detail": {"error": "Unauthorized: missing or invalid API key."}}, status_code=401)
        if (odd := _misbehaviour(query)) is not None:
            return odd
        results = [
            {"title": h["title"], "url": h["url"], "content": h["text"], "score": 0.9}
            for h in _hits("tavily", query, count)
        ]
        return JSONResponse({"query": query, "answer": None, "images": [], "results": results, "response_time": 0.1})

    async def searxng(request: Request) -> Response:
        query = request.query_params.get("q", "")
        seen.append({"provider": "searxng", "key": None, "query": query, "count": None})
        if request.query_params.get("format") != "json":
            return PlainTextResponse("Forbidden", status_code=403)
        if (odd := _misbehaviour(query)) is not None:
            return odd
        results = [
            {"title": h["title"], "url": h["url"], "content": h["text"], "engine": "standin"}
            for h in _hits("searxng", query, 10)
        ]
        return JSONResponse({"query": query, "number_of_results": len(results), "results": results})

    return Starlette(
        routes=[
            Route("/res/v1/web/search", brave, methods=["GET"]),
            Route("/search", tavily, methods=["POST"]),
            Route("/search", searxng, methods=["GET"]),
        ]
    )


@contextmanager
def search_standin() -> Iterator[StandIn]:
    """Serve the stand-in on a free 127.0.0.1 port until the block ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    standin = StandIn(f"http://127.0.0.1:{sock.getsockname()[1]}")
    config = uvicorn.Config(build_app(standin.seen), log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield standin
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
