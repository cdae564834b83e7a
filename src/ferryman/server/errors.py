"""The one place where exceptions become HTTP statuses."""

from __future__ import annotations

import logging
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ferryman.errors import (
    ConflictError,
    FerrymanError,
    InvalidRequestError,
    NotFoundError,
    TurnFailedError,
    UpstreamError,
)

log = logging.getLogger(__name__)

STATUS_OF: dict[type[FerrymanError], int] = {
    InvalidRequestError: 400,
    NotFoundError: 404,
    ConflictError: 409,
    UpstreamError: 502,
    TurnFailedError: 500,
}


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The JSON body of every error response."""
    error = {"code": code, "message": message, **{k: v for k, v in extra.items() if v is not None}}
    return {"error": error, "detail": message}


def status_of(exc: FerrymanError) -> int:
    """The HTTP status of one of our exceptions (the nearest mapped base class wins)."""
    for cls in type(exc).__mro__:
        if cls in STATUS_OF:
            return STATUS_OF[cls]
    return 500


# Our errors are answers, not accidents: repeating the request cannot change them, and
# repeating a failed turn would run (and bill) the model again. Stainless-generated clients
# such as llama-stack-client retry 409 and 5xx unless told otherwise by this header.
NO_RETRY = {"x-should-retry": "false"}


async def ferryman_error(request: Request, exc: Exception) -> Response:
    """Map our own exceptions to their status codes."""
    assert isinstance(exc, FerrymanError)
    field = exc.field if isinstance(exc, InvalidRequestError) else None
    body = error_body(exc.code, exc.message, field=field)
    return JSONResponse(body, status_code=status_of(exc), headers=NO_RETRY)


async def http_error(request: Request, exc: Exception) -> Response:
    """Routing errors (unknown path, wrong method) keep their status, in our body shape."""
    assert isinstance(exc, HTTPException)
    return JSONResponse(error_body("http_error", str(exc.detail)), status_code=exc.status_code, headers=exc.headers)


async def unexpected_error(request: Request, exc: Exception) -> Response:
    """Anything else is a bug: log it, answer 500 without its message."""
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return JSONResponse(error_body("internal_error", "internal server error"), status_code=500)


EXCEPTION_HANDLERS = {
    FerrymanError: ferryman_error,
    HTTPException: http_error,
    Exception: unexpected_error,
}
