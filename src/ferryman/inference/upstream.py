"""What a model server's failure says, and when a request that failed is sent again.

The rules are the ``openai`` SDK's, so that a model call fails and retries the same way whichever client made
it (``http1.py`` on the hot path, the SDK elsewhere): a refusal reads ``Error code: STATUS - BODY``; connection
errors, timeouts, 408, 409, 429 and 5xx are retried (a server's ``x-should-retry`` decides first), after the
server's ``retry-after-ms`` or ``retry-after`` when it gives one of at most a minute, else after an exponential
backoff of half a second doubling up to 8 seconds, less up to a quarter at random.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

ERROR_BYTES = 16384
"""How much of an error answer's body is read (its start is all a message quotes)."""
_RETRIED_STATUSES = frozenset({408, 409, 429})
_LONGEST_RETRY_AFTER = 60.0
_FIRST_BACKOFF = 0.5
_LONGEST_BACKOFF = 8.0


@dataclass(frozen=True)
class UpstreamProblem:
    """A failed model call: the answer's status (None: no answer), its message, its error code and type."""

    status: int | None
    message: str
    codes: tuple[Any, ...] = ()


def status_problem(status: int, body: bytes) -> UpstreamProblem:
    """The problem an error answer states: its JSON body's ``error`` (or the body itself) gives the codes."""
    text = body.decode("utf-8", "replace").strip()
    said: Any = text
    try:
        said = json.loads(text)
    except ValueError:
        pass
    error = said.get("error", said) if isinstance(said, dict) else None
    codes = (error.get("code"), error.get("type")) if isinstance(error, dict) else ()
    return UpstreamProblem(status, f"Error code: {status} - {said}", codes)


def retry_delay(attempt: int, status: int | None = None, headers: Mapping[str, str] | None = None) -> float | None:
    """Seconds to wait before sending again after the ``attempt``-th try failed (from 0); None: do not retry.

    Args:
        attempt: How many retries were made before this failure.
        status: The answer's status (None: no answer came, a connection error or a timeout: retried).
        headers: The answer's headers (names in lower case).
    """
    headers = headers or {}
    if status is not None and not _retried(status, headers):
        return None
    asked = _retry_after(headers)
    if asked is not None:
        return asked
    return min(_FIRST_BACKOFF * 2.0**attempt, _LONGEST_BACKOFF) * (1 - 0.25 * random.random())  # noqa: S311


def _retried(status: int, headers: Mapping[str, str]) -> bool:
    verdict = headers.get("x-should-retry")
    if verdict in ("true", "false"):
        return verdict == "true"
    return status in _RETRIED_STATUSES or status >= 500


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait a server asked for, when it asked for one of at most a minute."""
    seconds: float | None = None
    try:
        if "retry-after-ms" in headers:
            seconds = float(headers["retry-after-ms"]) / 1000
        elif "retry-after" in headers:
            seconds = _seconds_of(headers["retry-after"])
    except (ValueError, TypeError, OverflowError):
        return None
    return seconds if seconds is not None and 0 < seconds <= _LONGEST_RETRY_AFTER else None


def _seconds_of(value: str) -> float:
    """``retry-after`` as seconds: a number of them, or an HTTP date."""
    try:
        return float(value)
    except ValueError:
        return parsedate_to_datetime(value).timestamp() - time.time()
