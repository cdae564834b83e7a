"""Authentication at the edge: each request's bearer credential becomes the principal it runs as.

The middleware runs outermost, so everything inside it (idempotency keys,
quotas, the routes, storage) sees :data:`~ferryman.auth.principal.current_principal`.
A request without a valid credential gets a 401 with ``WWW-Authenticate``
whose body says nothing about why; why is logged, as an audit record of logger
``ferryman.audit``, with the request's id and never the credential.
"""

from __future__ import annotations

import uuid

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ferryman.auth.audit import audit, current_request_id
from ferryman.auth.principal import Authenticator, acting_as
from ferryman.errors import AuthenticationError

from .errors import error_response

OPEN_PATHS = frozenset({"/v1/health", "/openapi.json", "/docs"})
"""What anyone may read: the health check and the API's description."""
OPEN_PREFIXES = ("/docs/",)
"""The /docs page's own files."""
REQUEST_ID_HEADER = "x-request-id"
MAX_REQUEST_ID_LENGTH = 128


def request_id_of(headers: Headers) -> str:
    """The caller's ``X-Request-ID`` (if short and printable), else a new one."""
    given = headers.get(REQUEST_ID_HEADER, "")
    if 0 < len(given) <= MAX_REQUEST_ID_LENGTH and given.isprintable():
        return given
    return uuid.uuid4().hex


def bearer_credential(authorization: str | None) -> str | None:
    """The credential of an ``Authorization: Bearer …`` header, or None when there is no such header."""
    if authorization is None:
        return None
    scheme, _, credential = authorization.strip().partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential or " " in credential:
        return None
    return credential


class AuthenticationMiddleware:
    """Names each HTTP request (its request id) and runs it as the principal its bearer credential proves.

    Without an authenticator (authentication off) every request runs as no
    principal, as the server itself; with one, a request to anything but an
    open path without a valid credential is answered 401.

    Args:
        app: The app inside.
        authenticator: Turns a credential into a principal; None when authentication is off.
    """

    def __init__(self, app: ASGIApp, authenticator: Authenticator | None) -> None:
        self.app, self._authenticator = app, authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve an HTTP request under its request id, as its principal (or answer 401)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        named = current_request_id.set(request_id_of(headers))
        try:
            await self._serve(scope, receive, send, headers)
        finally:
            current_request_id.reset(named)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, headers: Headers) -> None:
        path = scope.get("path", "")
        if self._authenticator is None or path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
            await self.app(scope, receive, send)
            return
        credential = bearer_credential(headers.get("authorization"))
        try:
            if credential is None:
                raise AuthenticationError()
            principal = await self._authenticator.authenticate(credential)
        except AuthenticationError as exc:
            reason = getattr(exc, "reason", "no bearer credential" if credential is None else "rejected")
            audit("authentication_failed", scope.get("method", ""), scope.get("path", ""), reason)
            # The one 401 every failure gets: the generic message and WWW-Authenticate, whatever the reason.
            await error_response(AuthenticationError())(scope, receive, send)
            return
        with acting_as(principal):
            await self.app(scope, receive, send)
