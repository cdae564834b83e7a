"""``GET /console``: the web console, its page and assets from the package (:mod:`ferryman.console`).

The page and its files are open (authentication lets them through, see ``authn``): the page asks for an API
key itself and sends it on every API call as an ``Authorization`` header. Every answer carries a strict
Content-Security-Policy: scripts, styles, images and connections of this origin only, no inline code.
"""

from __future__ import annotations

import html

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ferryman.console import STATIC

CONSOLE_PATH = "/console"
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # The files change with the package: a browser asks again (and gets a 304 while unchanged).
    "Cache-Control": "no-cache",
}
_PAGE = "index.html"
_BASE_MARKER = "{{base}}"


async def console_page(request: Request) -> Response:
    """The console's page; its ``<base>`` names where this server serves it (behind a proxy's prefix too)."""
    base = html.escape(f"{request.scope.get('root_path', '')}{CONSOLE_PATH}/", quote=True)
    page = (STATIC / _PAGE).read_text(encoding="utf-8").replace(_BASE_MARKER, base)
    return HTMLResponse(page, headers=SECURITY_HEADERS)


class _Secured:
    """Adds :data:`SECURITY_HEADERS` to every answer of the app inside."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.decode().lower() != "cache-control"]
                headers += [(name.lower().encode(), value.encode()) for name, value in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, secured)


def console_routes() -> list[BaseRoute]:
    """``/console`` (and ``/console/``) and the console's files under ``/console/``."""
    return [
        Route(CONSOLE_PATH, console_page, methods=["GET"]),
        Route(f"{CONSOLE_PATH}/", console_page, methods=["GET"]),
        Mount(CONSOLE_PATH, app=_Secured(StaticFiles(directory=str(STATIC))), name="console-assets"),
    ]
