"""Each HTTP request's id, and its one access line.

The request id is the caller's ``X-Request-ID`` when it is short and made of
safe characters, else a new one; either way it is echoed in the response's
``X-Request-ID`` and set as :data:`ferryman.logs.current_request_id` while the
request is served, so every record logged meanwhile carries it (a turn started
by the request too: its task inherits the context).

When the response has ended (a stream's last event sent), the line is written to
the ``ferryman.access`` logger: the request id, the principal, the method, the
route's template (``/v1/agents/{agent_id}``, never the path: ids and whatever a
caller puts in a path stay out), the status, the duration and the trace id. No
header, query or body is written.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry import trace
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ferryman.auth.principal import current_principal
from ferryman.ids import new_hex
from ferryman.logs import current_request_id

from .errors import unexpected_error

log = logging.getLogger("ferryman.access")

REQUEST_ID_HEADER = "x-request-id"
MAX_REQUEST_ID_LENGTH = 128
_SAFE_REQUEST_ID = re.compile(rf"[A-Za-z0-9._:/+=@-]{{1,{MAX_REQUEST_ID_LENGTH}}}")
"""What a caller's request id may hold: letters, digits and ``._:/+=@-`` (UUIDs, ULIDs, W3C trace ids,
base64), nothing a log reader or a header could misread."""


def request_id_of(headers: Headers) -> str:
    """The caller's ``X-Request-ID`` (up to 128 safe characters), else a new one (32 hex digits)."""
    given = headers.get(REQUEST_ID_HEADER, "")
    return given if _SAFE_REQUEST_ID.fullmatch(given) else new_hex()


def served_route(routes: Sequence[BaseRoute], asked: Scope, served: Scope) -> str | None:
    """The template of the route that served a request (its mounts' prefixes first), None if none did.

    Read off ``served``, the scope the router filled in as it routed (``asked`` is a copy taken before):
    cheaper than matching the path against every route again, which only a request refused before
    routing (401, 429, 413) falls back to.
    """
    route = served.get("route")
    if isinstance(route, Route):
        return str(served.get("root_path", ""))[len(str(asked.get("root_path", ""))) :] + route.path
    return route_template(routes, asked)


def route_template(routes: Sequence[BaseRoute], scope: Scope) -> str | None:
    """The template of the route that serves ``scope`` (its mounts' prefixes first), None if none does.

    The first full match wins, as in Starlette's router; else the first partial one (the
    route of a 405).
    """
    partial: str | None = None
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.NONE:
            continue
        if isinstance(route, Mount):
            inner = route_template(route.routes, {**scope, **child})
            found = None if inner is None else route.path + inner
        else:
            found = route.path if isinstance(route, Route) else None
        if match is Match.FULL:
            return found
        partial = partial or found
    return partial


def current_trace_id() -> str | None:
    """The current span's trace id (32 hex digits), None when no valid span is current."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


@dataclass
class _Answered:
    """What the response's start told, read where the app sent it (its principal and span current)."""

    status: int | None = None
    principal: str | None = None
    trace_id: str | None = None


class AccessLogMiddleware:
    """Names each HTTP request, echoes its id, and logs one line when its response has ended.

    Outermost of ferryman's middleware: a request refused by authentication, quotas or body
    limits gets its id and its line too.

    Args:
        app: The app inside.
        routes: The app's routes, whose templates the lines name.
    """

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app, self._routes = app, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve an HTTP request under its request id; log its line once it is answered."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        asked = dict(scope)  # the router adds to the scope as it routes: the template is found in the original
        request_id = request_id_of(Headers(scope=scope))
        answered = _Answered()

        async def answer(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
                principal = current_principal.get()
                answered.status = message["status"]
                answered.principal = principal.qualified if principal is not None else None
                answered.trace_id = current_trace_id()
            await send(message)

        named = current_request_id.set(request_id)
        started = time.perf_counter()
        try:
            await self.app(scope, receive, answer)
        except Exception as exc:
            if answered.status is not None:
                raise
            # Answered here, not by Starlette's outermost handler: with the request's id, and logged under it
            # (once: raised on, the exception would be handled, and logged, there again).
            response = await unexpected_error(Request(scope), exc)
            await response(scope, receive, answer)
        finally:
            self._log(asked, scope, answered, time.perf_counter() - started)
            current_request_id.reset(named)

    def _log(self, scope: Scope, served: Scope, answered: _Answered, seconds: float) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        # No response started: an exception left the app, answered 500 by Starlette's outermost handler.
        status = answered.status if answered.status is not None else 500
        route = served_route(self._routes, scope, served)
        method = scope.get("method", "")
        trace_id = answered.trace_id or current_trace_id()
        duration_ms = round(seconds * 1000, 3)
        log.info(
            "%s %s %d %.1f ms by %s%s",
            method,
            route or "-",
            status,
            duration_ms,
            answered.principal or "-",
            f" trace_id={trace_id}" if trace_id else "",
            extra={
                "principal": answered.principal,
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": duration_ms,
                "trace_id": trace_id,
            },
        )
