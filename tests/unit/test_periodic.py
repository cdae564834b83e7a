"""The background loop the sweeps and the scheduler share: a beat at once, again after a failure, stopped at once."""

from __future__ import annotations

import asyncio

import pytest

from ferryman.periodic import Periodic

pytestmark = pytest.mark.anyio


async def test_it_beats_at_once_goes_on_after_a_failing_beat_and_stops() -> None:
    beats: list[int] = []
    third = asyncio.Event()

    async def beat() -> None:
        beats.append(len(beats))
        if len(beats) == 3:
            third.set()
        if len(beats) == 2:
            raise RuntimeError("a storage blip")

    loop = Periodic("test-loop", beat, 0.001)
    loop.start()
    async with asyncio.timeout(10):
        await third.wait()
    await loop.stop()
    stopped_at = len(beats)
    await asyncio.sleep(0.01)  # nothing may beat once stopped (a short look suffices: the interval is 1 ms)
    assert beats[:3] == [0, 1, 2] and len(beats) == stopped_at


async def test_a_beat_under_way_is_cancelled_by_stop() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def beat() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    loop = Periodic("test-loop", beat, 60)
    loop.start()
    async with asyncio.timeout(10):
        await started.wait()
        await loop.stop()
    assert cancelled.is_set()
    await loop.stop()  # stopping twice is harmless


async def test_a_wake_beats_at_once_and_the_interval_is_asked_after_each_beat() -> None:
    beats: list[int] = []
    beaten = asyncio.Event()
    asked: list[int] = []

    async def beat() -> None:
        beats.append(len(beats))
        beaten.set()

    def interval() -> float:
        asked.append(len(beats))
        return 60.0  # only a wake brings the next beat within the test's time

    loop = Periodic("test-loop", beat, interval)
    loop.start()
    async with asyncio.timeout(10):
        await beaten.wait()
        beaten.clear()
        loop.wake()
        await beaten.wait()
    await loop.stop()
    assert beats == [0, 1] and asked[:1] == [1]
