"""Cron expressions read in a time zone: ticks across the changes to and from summer time, macros, and refusals."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ferryman.errors import InvalidRequestError
from ferryman.services.cron import check_cron, next_tick, time_zone

BERLIN = time_zone("Europe/Berlin")
NEW_YORK = time_zone("America/New_York")


def utc(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp())


def ticks(expression: str, zone: object, after: int, count: int) -> list[int]:
    found = []
    for _ in range(count):
        after = next_tick(expression, zone, after)  # type: ignore[arg-type]
        found.append(after)
    return found


def test_a_daily_tick_follows_the_wall_clock_across_summer_time() -> None:
    # 09:00 in New York: 13:00 UTC in summer, 14:00 UTC in winter (the clocks went back on 2 November 2025).
    assert ticks("0 9 * * *", NEW_YORK, utc(2025, 11, 1, 12), 2) == [utc(2025, 11, 1, 13), utc(2025, 11, 2, 14)]


def test_a_tick_in_the_skipped_hour_runs_at_the_first_minute_after_it() -> None:
    # 02:30 does not exist in Berlin on 30 March 2025 (02:00 became 03:00): it runs at 03:00 (01:00 UTC).
    assert ticks("30 2 * * *", BERLIN, utc(2025, 3, 29, 12), 3) == [
        utc(2025, 3, 30, 1), utc(2025, 3, 31, 0, 30), utc(2025, 4, 1, 0, 30),
    ]  # fmt: skip


def test_a_tick_in_the_repeated_hour_runs_once() -> None:
    # 02:30 happens twice in Berlin on 26 October 2025 (03:00 became 02:00): it runs at the first.
    assert ticks("30 2 * * *", BERLIN, utc(2025, 10, 25, 12), 2) == [utc(2025, 10, 26, 0, 30), utc(2025, 10, 27, 1, 30)]


def test_every_quarter_hour_goes_on_through_the_repeated_hour_without_going_back() -> None:
    start = utc(2025, 10, 26, 0, 50)  # 02:50 summer time, ten minutes before the clocks go back
    found = ticks("*/15 * * * *", BERLIN, start, 8)
    assert found == sorted(set(found)) and all(tick > start for tick in found)


def test_macros_and_spaces() -> None:
    now = utc(2025, 6, 2, 6, 10)
    assert check_cron("@hourly", UTC, now) == utc(2025, 6, 2, 7)
    assert check_cron("@DAILY", UTC, now) == utc(2025, 6, 3)
    assert check_cron("  0   7  *  *  * ", UTC, now) == utc(2025, 6, 2, 7)


@pytest.mark.parametrize(
    "expression", ["* * * *", "* * * * * *", "60 * * * *", "0 0 30 2 *", "@fortnightly", "0 0 * * MON-"]
)
def test_what_is_no_five_field_expression_or_never_fires_is_refused(expression: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        check_cron(expression, UTC, utc(2025, 6, 2))
    assert raised.value.field == "cron"


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../../etc/passwd", "europe/berlin"])
def test_an_unknown_time_zone_is_refused(name: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        time_zone(name)
    assert raised.value.field == "timezone"
