"""Each caller's requests counted against its quota, right after authentication named the caller."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from ferryman.auth.quotas import Quotas
from ferryman.errors import RateLimitedError

from .errors import error_response


class RateLimitMiddleware:
    """Pure ASGI middleware: a request over its caller's quota is a 429 with ``Retry-After``, and runs nothing.

    Args:
        app: The app it wraps.
        quotas: The callers' quotas.
    """

    def __init__(self, app: ASGIApp, quotas: Quotas) -> None:
        self._app = app
        self._quotas = quotas

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Count an HTTP request, then pass it on (or refuse it)."""
        if scope["type"] == "http":
            try:
                await self._quotas.count_request()
            except RateLimitedError as exc:  # middleware runs outside the app's exception handlers
                await error_response(exc)(scope, receive, send)
                return
        await self._app(scope, receive, send)
