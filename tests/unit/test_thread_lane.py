"""SQLite's threads: calls run off the loop in order, errors reach the caller, cancelled ones are skipped."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ferryman.storage.sql.lanes import ThreadLane

pytestmark = pytest.mark.anyio


async def test_calls_run_on_the_lane_s_thread_in_order_and_raise_there_errors_to_the_caller() -> None:
    lane = ThreadLane(1, "lane-test")
    ran: list[tuple[int, str]] = []

    def note(number: int) -> int:
        ran.append((number, threading.current_thread().name))
        return number * 2

    try:
        assert await asyncio.gather(*(lane.call(note, n) for n in range(50))) == [n * 2 for n in range(50)]
        assert [number for number, _ in ran] == list(range(50))
        assert {name for _, name in ran} == {"lane-test_0"}
        with pytest.raises(ZeroDivisionError):
            await lane.call(lambda: 1 / 0)
        assert await lane.call(note, 7) == 14  # the thread outlived the error
    finally:
        lane.close()


async def test_a_call_cancelled_before_its_turn_is_not_run_and_close_finishes_the_queue() -> None:
    lane = ThreadLane(1, "lane-test")
    release = threading.Event()
    ran: list[str] = []

    def blocking() -> None:
        release.wait(10)
        ran.append("first")

    first = asyncio.ensure_future(lane.call(blocking))
    await asyncio.sleep(0)
    skipped = asyncio.ensure_future(lane.call(ran.append, "skipped"))
    kept = asyncio.ensure_future(lane.call(ran.append, "kept"))
    await asyncio.sleep(0)
    skipped.cancel()
    release.set()
    await first
    await kept
    lane.close()
    assert ran == ["first", "kept"]
    assert skipped.cancelled()


async def test_readers_share_the_work_and_a_closed_lane_starts_again() -> None:
    lane = ThreadLane(2, "lane-test")
    both = threading.Barrier(2, timeout=10)

    def meet() -> str:
        both.wait()  # only two threads at once get past: the lane has two
        return threading.current_thread().name

    names = await asyncio.gather(lane.call(meet), lane.call(meet))
    assert sorted(names) == ["lane-test_0", "lane-test_1"]
    lane.close()
    assert await lane.call(lambda: 3) == 3
    lane.close()
