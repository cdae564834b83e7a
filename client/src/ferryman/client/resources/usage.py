"""``client.usage``: the tokens and turns of a time range, summed per agent, principal or model."""

from __future__ import annotations

from datetime import UTC, datetime

from ferryman.api.usage import UsageGroup, UsageSummary

from .._parsing import model
from .._transport import Call, RequestPlan
from ._base import AsyncResource, SyncResource

Instant = datetime | float | int | str
"""A range's bound: a datetime (UTC unless it says otherwise), seconds since the epoch, or ISO 8601 text."""


def _instant(value: Instant | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return (value if value.tzinfo is not None else value.replace(tzinfo=UTC)).isoformat()
    return repr(float(value))


def _get(group_by: UsageGroup, since: Instant | None, until: Instant | None) -> Call[UsageSummary]:
    params = {"group_by": group_by, "since": _instant(since), "until": _instant(until)}
    return Call(RequestPlan("GET", "/v1/usage", params=params), model(UsageSummary))


class Usage(SyncResource):
    """``client.usage``: ``get(group_by=..., since=..., until=...)``."""

    def get(
        self, *, group_by: UsageGroup = "agent", since: Instant | None = None, until: Instant | None = None
    ) -> UsageSummary:
        """The usage the caller may read, recorded in ``[since, until)``, summed per ``group_by``.

        Args:
            group_by: ``agent``, ``principal`` or ``model``.
            since: The range's start (default: midnight UTC today).
            until: Its end, excluded (default: now).
        """
        return self._transport.call(_get(group_by, since, until))


class AsyncUsage(AsyncResource):
    """``client.usage`` of the async client: ``await get(group_by=..., since=..., until=...)``."""

    async def get(
        self, *, group_by: UsageGroup = "agent", since: Instant | None = None, until: Instant | None = None
    ) -> UsageSummary:
        """The usage the caller may read, recorded in ``[since, until)``, summed per ``group_by`` (see
        :meth:`Usage.get`)."""
        return await self._transport.call(_get(group_by, since, until))
