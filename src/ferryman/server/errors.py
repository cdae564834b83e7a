"""The one place where exceptions become HTTP statuses."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ferryman.errors import FAILURES, AuthenticationError, FerrymanError, IdempotencyKeyInUseError, RateLimitedError

log = logging.getLogger(__name__)

Handler = Callable[[Request, Exception], Awaitable[Response]]

STATUS_OF: dict[type[FerrymanError], int] = {cls: status for cls, status in FAILURES.values()}
"""The HTTP status of each of our exception classes, from the one table in :mod:`ferryman.errors`."""


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The JSON body of every error response."""
    error = {"code": code, "message": message, **{k: v for k, v in extra.items() if v is not None}}
    return {"error": error, "detail": message}


# Our errors are answers, not accidents: repeating the request cannot change them, and
# repeating a failed turn would run (and bill) the model again. Stainless-generated clients
# such as llama-stack-client retry 409 and 5xx unless told otherwise by this header.
NO_RETRY = {"x-should-retry": "false"}


def _answer_with(status: int) -> Handler:
    """The handler of our exceptions of one status: the body carries the code, message and fields."""

    async def answer(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, FerrymanError)
        return error_response(exc, status)

    return answer


def error_response(exc: FerrymanError, status: int | None = None) -> JSONResponse:
    """The answer to one of our exceptions (for middleware, which runs outside the exception handlers).

    Args:
        exc: The exception.
        status: Its HTTP status; by default the one the failure table gives its class.
    """
    body = error_body(exc.code, exc.message, **exc.fields)
    code = status if status is not None else status_of(exc)
    return JSONResponse(body, status_code=code, headers=_headers_of(exc))


def status_of(exc: FerrymanError) -> int:
    """The HTTP status of one of our exceptions: its class's, or its nearest base class's (as the handlers do)."""
    return next((STATUS_OF[cls] for cls in type(exc).__mro__ if cls in STATUS_OF), 500)


def _headers_of(exc: FerrymanError) -> dict[str, str]:
    if isinstance(exc, RateLimitedError):  # a later retry may pass: say when, and let clients retry
        return {"Retry-After": str(exc.retry_after)}
    if isinstance(exc, IdempotencyKeyInUseError):  # the first call's outcome will be there soon
        return {"Retry-After": "1"}
    if isinstance(exc, AuthenticationError):
        return {**NO_RETRY, "WWW-Authenticate": 'Bearer realm="ferryman"'}
    return NO_RETRY


async def http_error(request: Request, exc: Exception) -> Response:
    """Routing errors (unknown path, wrong method) keep their status, in our body shape."""
    assert isinstance(exc, HTTPException)
    return JSONResponse(error_body("http_error", str(exc.detail)), status_code=exc.status_code, headers=exc.headers)


async def unexpected_error(request: Request, exc: Exception) -> Response:
    """Anything else is a bug: log it, answer 500 without its message."""
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse(error_body("internal_error", "internal server error"), status_code=500)


# One handler per class; Starlette picks the one of the nearest class in the exception's MRO.
EXCEPTION_HANDLERS: dict[type[Exception], Handler] = {
    FerrymanError: _answer_with(500),
    **{cls: _answer_with(status) for cls, status in STATUS_OF.items()},
    HTTPException: http_error,
    Exception: unexpected_error,
}
