"""SQLite's threads: calls run off the loop in order, errors reach the caller, cancelled ones are skipped."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import threading
from pathlib import Path

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


async def test_readers_share_the_work_and_a_closed_lane_refuses_calls() -> None:
    lane = ThreadLane(2, "lane-test")
    both = threading.Barrier(2, timeout=10)

    def meet() -> str:
        both.wait()  # only two threads at once get past: the lane has two
        return threading.current_thread().name

    names = await asyncio.gather(lane.call(meet), lane.call(meet))
    assert sorted(names) == ["lane-test_0", "lane-test_1"]
    lane.close()
    with pytest.raises(RuntimeError, match="closed"):
        await lane.call(lambda: 3)
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("lane-test")]


async def test_a_call_raising_stop_iteration_fails_instead_of_hanging() -> None:
    lane = ThreadLane(1, "lane-test")
    try:
        with pytest.raises(RuntimeError, match="StopIteration"):
            await asyncio.wait_for(lane.call(next, iter([])), 10)
    finally:
        lane.close()


async def test_a_lane_collected_unclosed_stops_its_threads() -> None:
    lane = ThreadLane(2, "lane-dropped")
    assert await lane.call(lambda: 1) == 1
    del lane
    gc.collect()
    assert not [thread for thread in threading.enumerate() if thread.name.startswith("lane-dropped")]


def test_calls_under_way_at_exit_finish_though_nobody_closed_the_lane(tmp_path: Path) -> None:
    written = tmp_path / "written"
    script = f"""
import asyncio, threading, time
from pathlib import Path
from ferryman.storage.sql.lanes import ThreadLane

def slow_write(path):
    time.sleep(0.3)
    Path(path).write_text("done")

async def main():
    lane = ThreadLane(1, "exit-test")
    started = threading.Event()
    asyncio.ensure_future(lane.call(started.set))
    asyncio.ensure_future(lane.call(slow_write, {str(written)!r}))
    while not started.is_set():
        await asyncio.sleep(0.01)
    globals()["kept"] = lane  # alive at exit, never closed

asyncio.run(main())
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=60)
    assert written.read_text() == "done"
