"""Each request's audit scope: the app's audit sink made current, and every 429 audited.

:func:`ferryman.auth.audit.audit` finds the sink of the app serving the request
through :data:`~ferryman.auth.audit.current_audit` (several apps may run in one
process: the sink is never a module's global). The scope also says the
request's method (a read refused while deleting is the delete's refusal) and
finds its route template when a record asks for it.

A 429 is audited here, whoever refused the request (the per-minute quota
before any route, or the running-turns quota inside one): the response's start
is sent from inside the request's principal, which the record names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ferryman.auth.audit import AuditScope, AuditSink, audit, auditing, http_action

from .access_log import served_route

TOO_MANY_REQUESTS = 429


class AuditMiddleware:
    """Serves each HTTP request under the app's audit scope; audits its answer if it is a 429.

    Args:
        app: The app inside.
        sink: Where this app's audit records go.
        routes: The app's routes, whose templates the records name.
    """

    def __init__(self, app: ASGIApp, sink: AuditSink, routes: Sequence[BaseRoute]) -> None:
        self.app, self._sink, self._routes = app, sink, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve an HTTP request with its audit scope current."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        asked: dict[str, Any] = dict(scope)  # routing adds to the scope: the template is found in the original
        method = str(scope.get("method", ""))
        audited = AuditScope(self._sink, method, lambda: served_route(self._routes, asked, scope))

        async def answer(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == TOO_MANY_REQUESTS:
                audit("rate_limited", http_action(method), str(asked.get("path", "")), status=TOO_MANY_REQUESTS)
            await send(message)

        with auditing(audited):
            await self.app(scope, receive, answer)
