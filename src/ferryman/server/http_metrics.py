"""Each HTTP request timed into ``http_server_request_duration_seconds``, by route template, method and status."""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Sequence

from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ferryman.metrics.instruments import HTTP_DURATION

from .access_log import served_route

UNMATCHED = "unmatched"
"""The ``http_route`` of a request no route serves (a 404 by path): never the path itself."""
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"})
OTHER_METHOD = "_OTHER"
"""The ``http_request_method`` of any other method (OpenTelemetry's word): a caller's text is no label value."""
_CONVERTER = re.compile(r"\{(\w+):\w+\}")


@functools.cache  # one entry per route template: a bounded set
def _as_documented(template: str) -> str:
    """A route's template as the OpenAPI document writes it: ``{model_id}``, not Starlette's ``{model_id:path}``."""
    return _CONVERTER.sub(r"{\1}", template)


class HttpMetricsMiddleware:
    """Pure ASGI middleware timing every HTTP request until its response ended (a stream's last event).

    Placed outside authentication, quotas and body limits, so that their refusals count too.

    Args:
        app: The app inside.
        routes: The app's routes, whose templates label the requests (ids never do).
    """

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app, self._routes = app, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request; observe its duration once it is answered."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        asked = dict(scope)  # the router adds to the scope as it routes: the template is found in the original
        status = 500  # what Starlette's outermost handler answers when an exception leaves the app

        async def answer(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        started = time.perf_counter()
        try:
            await self.app(scope, receive, answer)
        finally:
            template = served_route(self._routes, asked, scope)
            route = _as_documented(template) if template is not None else UNMATCHED
            method = asked.get("method", "")
            method = method if method in KNOWN_METHODS else OTHER_METHOD
            HTTP_DURATION.labels(method, route, str(status)).observe(time.perf_counter() - started)
