"""An OpenTelemetry server span per HTTP request, continuing the caller's trace (W3C ``traceparent``).

The span is named after the route's template (``POST /v1/agents/{agent_id}/session/{session_id}/turn``)
and current while the app serves the request, so that a turn the request starts (in a task of its own,
which inherits the context) nests under it. It ends when the response has ended: a stream's last event.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .access_log import served_route

_tracer = trace.get_tracer("ferryman.server")


class TracingMiddleware:
    """Serves each HTTP request inside its server span (added only while traces are on).

    Args:
        app: The app inside.
        routes: The app's routes, whose templates name the spans.
    """

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app, self._routes = app, routes
        self._fields = {name.lower().encode("latin-1") for name in propagate.get_global_textmap().fields}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve an HTTP request in a span continuing the trace its headers carry."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"] if k in self._fields}
        method = scope.get("method", "")
        asked = dict(scope)  # the router adds its route to ``scope`` as it routes
        attributes = {"http.request.method": method, "url.path": scope.get("path", ""), "url.scheme": scope["scheme"]}
        span = _tracer.start_span(
            method, context=propagate.extract(carrier), kind=SpanKind.SERVER, attributes=attributes
        )

        async def answer(message: Message) -> None:
            if message["type"] == "http.response.start":
                route = served_route(self._routes, asked, scope)
                if route is not None:
                    span.update_name(f"{method} {route}")
                    span.set_attribute("http.route", route)
                status = message["status"]
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_attribute("error.type", str(status))
                    span.set_status(Status(StatusCode.ERROR))
            await send(message)

        # Tracer.start_as_current_span's use_span, without its other two layers.
        with trace.use_span(span, end_on_exit=True):
            await self.app(scope, receive, answer)
