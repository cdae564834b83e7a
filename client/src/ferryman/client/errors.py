"""The errors of ``ferryman.client``: one class per HTTP status family, carrying the server's code and message.

Ferryman answers every failure with ``{"error": {"code", "message", "field"?}, "detail"}``; the
exception keeps each part, and the whole body, so callers branch on ``code`` rather than on text.
"""

from __future__ import annotations

import json
from typing import Any


class FerrymanClientError(Exception):
    """The base of every error this client raises."""


class APIError(FerrymanClientError):
    """A request that failed: the server's answer, or no answer at all.

    Attributes:
        message: What went wrong, for people.
        status_code: The HTTP status (``None`` when no answer came).
        code: The server's stable error code (``not_found``, ``rate_limited``…), when it gave one.
        field: The request field to blame, when the server named one.
        body: The decoded answer body (a dict for JSON, else its text).
    """

    def __init__(
        self,
        message: str,
        status_code: int | None = None,
        code: str | None = None,
        field: str | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.code = code
        self.field = field
        self.body = body

    def __str__(self) -> str:
        status = f"{self.status_code} " if self.status_code is not None else ""
        code = f"{self.code}: " if self.code else ""
        return f"{status}{code}{self.message}"


class APIStatusError(APIError):
    """The server answered with a 4xx or 5xx status."""


class BadRequestError(APIStatusError):
    """400: the request is invalid."""


class AuthenticationError(APIStatusError):
    """401: no valid credentials."""


class PermissionDeniedError(APIStatusError):
    """403: the caller may not do this."""


class NotFoundError(APIStatusError):
    """404: no such record (or one the caller may not read)."""


class ConflictError(APIStatusError):
    """409: the record's state forbids the request (a turn already running, a name taken…)."""


class PayloadTooLargeError(APIStatusError):
    """413: the upload is over the server's limit."""


class UnprocessableEntityError(APIStatusError):
    """422: the request is well formed but cannot be processed (an idempotency key reused for another request)."""


class RateLimitError(APIStatusError):
    """429: over a quota; ``retry_after`` says when to try again, if the server said."""

    retry_after: float | None = None


class InternalServerError(APIStatusError):
    """5xx: the server or one of its upstreams failed."""


class APIConnectionError(APIError):
    """No answer: the server could not be reached or the connection broke."""


class APITimeoutError(APIConnectionError):
    """No answer in time."""


class TurnFailedError(APIError):
    """A turn an agent ran ended in failure on the server (cancelled and interrupted turns included).

    :class:`~ferryman.client.Agent` and :class:`~ferryman.client.AsyncAgent` raise it from
    ``create_turn``: at once when the turn is not streamed; streamed, when the iteration goes on
    past the :class:`~ferryman.client.events.TurnFailed` event it yields first (a loop that stops
    at that event sees no exception).

    Attributes:
        code: The server's failure code: ``internal_error``, ``upstream_error``, ``cancelled``,
            ``interrupted``, ``context_length_exceeded``…
        turn_id: The turn (Agents API), or the first response of the turn (Responses API), when known.
        response_id: The response that failed (Responses API), when known.
        status_code: The HTTP status of the answer that said so (``None`` when a stream said it).
    """

    code: str

    def __init__(
        self,
        message: str,
        code: str,
        *,
        turn_id: str | None = None,
        response_id: str | None = None,
        status_code: int | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message, status_code, code, None, body)
        self.turn_id = turn_id
        self.response_id = response_id


_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def error_class(status_code: int) -> type[APIStatusError]:
    """The exception class of an HTTP error status."""
    if status_code in _BY_STATUS:
        return _BY_STATUS[status_code]
    return InternalServerError if status_code >= 500 else APIStatusError


def status_error(status_code: int, content: bytes, retry_after: float | None = None) -> APIStatusError:
    """The exception for an error answer: its class from the status, its parts from ferryman's error body.

    Args:
        status_code: The answer's status.
        content: The answer's body.
        retry_after: The delay the server asked for (``Retry-After``), if any.
    """
    body = _decoded(content)
    message, code, field = f"HTTP {status_code}", None, None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            message = str(error.get("message") or message)
            code = error.get("code") if isinstance(error.get("code"), str) else None
            field = error.get("field") if isinstance(error.get("field"), str) else None
        elif isinstance(body.get("detail"), str):
            message = body["detail"]
    elif isinstance(body, str) and body.strip():
        message = body.strip()[:500]
    exc = error_class(status_code)(message, status_code, code, field, body)
    if isinstance(exc, RateLimitError):
        exc.retry_after = retry_after
    return exc


def _decoded(content: bytes) -> Any:
    if not content:
        return None
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", "replace")
