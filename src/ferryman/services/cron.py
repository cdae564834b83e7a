"""Cron expressions and time zones: checking what a schedule names, and finding its next tick.

Expressions have the five fields of cron (minute, hour, day of month, month, day
of week) or one of the macros below, and are read in an IANA time zone, in its
wall-clock time, by ``cronsim`` (the rules of Debian's cron): a tick at a
wall-clock time that a change to summer time skips runs at the first minute
after the gap, and one at a time that the change back repeats runs once, at its
first occurrence.
"""

from __future__ import annotations

import functools
import zoneinfo
from datetime import datetime, tzinfo

from cronsim import CronSim, CronSimError

from ferryman.errors import InvalidRequestError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The macros of cron, as the expressions they stand for."""
_FIELDS = 5
_MOST_REPEATS = 24 * 60 + 1
"""Ticks a wall clock can show before an instant it repeats is passed (a repeated hour of minutes, with room)."""
_MINUTE = 60
_SCAN_TICKS = 3 * 24 * 60
"""Ticks read to find an expression's shortest interval: every pattern of minutes and hours shows within a few
days of ticks (the same ones repeat on each day it fires)."""
_SCAN_SECONDS = 366 * 86_400
"""How far ahead an expression's ticks are read at most (one whose ticks are rare reaches this first)."""


@functools.cache
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def time_zone(name: str) -> tzinfo:
    """The IANA time zone ``name`` names.

    Raises:
        InvalidRequestError: it names none (400, naming ``timezone``).
    """
    if name not in _zones():
        raise InvalidRequestError(f"timezone '{name}' is not an IANA time zone (such as 'Europe/Berlin')", "timezone")
    return zoneinfo.ZoneInfo(name)


def expanded(expression: str) -> str:
    """The expression with a macro replaced by its five fields, and spaces normalised."""
    text = " ".join(expression.split())
    return MACROS.get(text.lower(), text)


def check_cron(expression: str, zone: tzinfo, now: float) -> int:
    """Check a cron expression; the first tick after ``now``.

    Raises:
        InvalidRequestError: it does not have five fields, a field is malformed, or it never fires (400, naming
            ``cron``).
    """
    fields = expanded(expression)
    if len(fields.split()) != _FIELDS:
        raise InvalidRequestError(
            "cron must have five fields (minute hour day-of-month month day-of-week) or be a macro such as @hourly",
            "cron",
        )
    try:
        return next_tick(fields, zone, now)
    except CronSimError as exc:
        raise InvalidRequestError(f"cron is not a valid expression: {exc}", "cron") from exc
    except StopIteration:
        raise InvalidRequestError("cron never fires (no tick in the next fifty years)", "cron") from None


def next_tick(expression: str, zone: tzinfo, after: float) -> int:
    """The first tick of ``expression`` (read in ``zone``) strictly after the instant ``after``, in Unix seconds.

    Raises:
        CronSimError: the expression is malformed.
        StopIteration: it has no tick in the next fifty years.
    """
    ticks = CronSim(expanded(expression), datetime.fromtimestamp(after, zone))
    for _ in range(_MOST_REPEATS):
        # An instant inside an hour the clock repeats maps back to an earlier wall time: read on past it.
        instant = next(ticks).timestamp()
        if instant > after:
            return int(instant)
    raise StopIteration


def check_interval(expression: str, zone: tzinfo, first: int, least: int) -> None:
    """Check that the ticks of ``expression`` from ``first`` on are never closer than ``least`` seconds.

    Raises:
        InvalidRequestError: two ticks are closer (400, naming ``cron`` and ``schedules.min_interval_seconds``).
    """
    if least <= _MINUTE:  # a minute is the finest tick
        return
    ticks = CronSim(expanded(expression), datetime.fromtimestamp(first, zone))
    previous = float(first)
    try:
        for _ in range(_SCAN_TICKS):
            instant = next(ticks).timestamp()
            if instant <= previous:  # the first tick itself, or a wall time the clock repeats
                continue
            if instant - previous < least:
                raise InvalidRequestError(
                    f"cron fires {int(instant - previous)} seconds apart at times; ticks must be at least {least} "
                    "seconds apart (schedules.min_interval_seconds)",
                    "cron",
                )
            if instant > first + _SCAN_SECONDS:
                return
            previous = instant
    except StopIteration:
        return
