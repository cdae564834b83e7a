"""Request bodies bounded while they arrive: a body over its route's limit is a 413, and nothing past it is read.

A JSON body may hold ``server.max_body_bytes``; an upload (a route whose body is
``multipart/form-data``, see :meth:`~ferryman.server.contract.Endpoint.is_upload`)
``files.max_bytes`` and room for the form around the file. A declared
``Content-Length`` over the limit is refused before the body is read; a body
without one (chunked) is counted as its chunks arrive and refused at the chunk
that passes the limit, so neither a parser nor a spooled temporary file ever
holds more.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ferryman.errors import PayloadTooLargeError

from .contract import Endpoint
from .errors import error_response

FORM_OVERHEAD = 64 * 1024
"""Room in an upload's body for the form's other fields and boundaries beside the file itself."""


@dataclass(frozen=True)
class BodyLimit:
    """How large a body may be.

    Attributes:
        most: The limit the error names, in bytes.
        setting: The setting that sets it.
        what: What the body is, for the error ("request body", "file").
        field: The request field the error names, if any.
        slack: Bytes allowed beyond ``most`` (an upload's form around its file).
    """

    most: int
    setting: str
    what: str = "request body"
    field: str | None = None
    slack: int = 0

    def error(self) -> PayloadTooLargeError:
        """The 413 of a body over this limit."""
        message = f"the {self.what} is larger than the limit of {self.most} bytes ({self.setting})"
        return PayloadTooLargeError(message, self.field)


def upload_routes(mounts: Sequence[tuple[str, Sequence[Endpoint]]]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The method and path pattern of every upload route of the tables, under their prefixes."""
    return tuple(
        (entry.method, compile_path(prefix + entry.path)[0])
        for prefix, table in mounts
        for entry in table
        if entry.is_upload()
    )


class BodyLimitMiddleware:
    """Pure ASGI middleware that holds every HTTP request's body to its route's limit.

    Args:
        app: The app it wraps.
        body: The limit of every body but an upload's.
        upload: The limit of an upload's body.
        uploads: The upload routes (see :func:`upload_routes`).
    """

    def __init__(
        self, app: ASGIApp, body: BodyLimit, upload: BodyLimit, uploads: Sequence[tuple[str, re.Pattern[str]]]
    ) -> None:
        self._app, self._body, self._upload, self._uploads = app, body, upload, uploads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a body declared too large; count one that arrives, refusing it once it passes the limit."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        limit = self._limit_of(scope)
        declared = _content_length(scope)
        if declared is not None and declared > limit.most + limit.slack:
            await error_response(limit.error())(scope, receive, send)
            return
        counted = _Counted(receive, limit)
        answer = _Answer(send)
        try:
            await self._app(scope, counted.receive, answer.send)
        except PayloadTooLargeError as exc:
            # Raised by the counting receive where no exception handler runs (a middleware reading the body).
            if answer.started or not counted.exceeded:
                raise
            await error_response(exc)(scope, receive, answer.send)

    def _limit_of(self, scope: Scope) -> BodyLimit:
        method, path, root = scope["method"], scope["path"], scope.get("root_path", "")
        if root and path.startswith(root):
            path = path.removeprefix(root)
        if any(method == m and pattern.match(path) for m, pattern in self._uploads):
            return self._upload
        return self._body


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name.lower() == b"content-length":
            text = bytes(value).decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


class _Counted:
    """A ``receive`` that counts the body's bytes and raises the limit's 413 at the chunk that passes it."""

    def __init__(self, receive: Receive, limit: BodyLimit) -> None:
        self._receive, self._limit = receive, limit
        self._allowed = limit.most + limit.slack
        self._read = 0
        self.exceeded = False

    async def receive(self) -> Message:
        if self.exceeded:  # nothing more is read once the limit is passed
            raise self._limit.error()
        message = await self._receive()
        if message["type"] == "http.request":
            self._read += len(message.get("body", b""))
            if self._read > self._allowed:
                self.exceeded = True
                raise self._limit.error()
        return message


class _Answer:
    """A ``send`` that notes whether the response has started."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)
