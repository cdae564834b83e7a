"""``GET /v1/usage``: the tokens and turns of a time range, summed per agent, principal or model.

With authentication on, a caller sums its own runs; a policy rule permitting ``read``
on ``usage::*`` lets it sum everyone's.
"""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Literal, cast, get_args

from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.usage import UsageGroup, UsageSummary
from ferryman.auth.principal import current_principal
from ferryman.errors import InvalidRequestError

from .contract import Endpoint, Param
from .http import JSONModelResponse, query_instant, services

_GROUPS: tuple[str, ...] = get_args(UsageGroup)


async def get_usage(request: Request) -> Response:
    """The usage recorded in a time range (by default today, UTC), summed per agent, principal or model."""
    group_by = request.query_params.get("group_by") or "agent"
    if group_by not in _GROUPS:
        raise InvalidRequestError(f"group_by must be one of {', '.join(_GROUPS)}", "group_by")
    since = query_instant(request, "since")
    until = query_instant(request, "until")
    summary = await services(request).usage.summary(
        current_principal.get(), cast(UsageGroup, group_by), start_of_today() if since is None else since, until
    )
    return JSONModelResponse(summary)


def start_of_today() -> float:
    """Midnight (UTC) of today, in seconds since the epoch."""
    return datetime.combine(datetime.now(UTC).date(), time(), UTC).timestamp()


ROUTES: tuple[Endpoint, ...] = (
    Endpoint("GET", "/usage", get_usage, "Sum token usage per agent, principal or model", "Usage",
             response=UsageSummary, errors=(400,), query=(
                 Param("group_by", Literal["agent", "principal", "model"],
                       "What the usage is summed by (default ``agent``)."),
                 Param("since", str, "The range's start, included: ISO 8601 (UTC unless it says otherwise) or "
                       "seconds since the epoch. Default: midnight UTC today."),
                 Param("until", str, "The range's end, excluded, written like ``since``. Default: now."),
             )),
)  # fmt: skip
"""Ferryman's own usage API."""
