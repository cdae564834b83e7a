"""Authentication at the edge: each request's bearer credential becomes the principal it runs as.

The middleware runs outermost, so everything inside it (idempotency keys,
quotas, the routes, storage) sees :data:`~ferryman.auth.principal.current_principal`.
A request without a valid credential gets a 401 with ``WWW-Authenticate``
whose body says nothing about why; why is logged, as an audit record of logger
``ferryman.audit``, with the request's id (named by the access log's middleware,
outside this one) and never the credential.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from ferryman.auth.audit import audit, http_action
from ferryman.auth.principal import Authenticator, acting_as
from ferryman.errors import AuthenticationError

from .errors import error_response

AUTHENTICATION_FAILED = 401
OPEN_PATHS = frozenset({"/v1/health", "/openapi.json", "/docs", "/console"})
"""What anyone may read: the health check, the API's description and the console's page (which signs in itself)."""
OPEN_PREFIXES = ("/docs/", "/console/")
"""The /docs page's and the console's own files."""


def _open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


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
    """Runs each HTTP request as the principal its bearer credential proves.

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
        """Serve an HTTP request as its principal (or answer 401)."""
        path = scope.get("path", "")
        if scope["type"] != "http" or self._authenticator is None or _open(path):
            await self.app(scope, receive, send)
            return
        credential = bearer_credential(Headers(scope=scope).get("authorization"))
        try:
            if credential is None:
                raise AuthenticationError()
            principal = await self._authenticator.authenticate(credential)
        except AuthenticationError as exc:
            reason = getattr(exc, "reason", "no bearer credential" if credential is None else "rejected")
            method, path = scope.get("method", ""), scope.get("path", "")
            audit("authentication_failed", http_action(method), path, reason, status=AUTHENTICATION_FAILED)
            # The one 401 every failure gets: the generic message and WWW-Authenticate, whatever the reason.
            await error_response(AuthenticationError())(scope, receive, send)
            return
        with acting_as(principal):
            await self.app(scope, receive, send)
