"""A live turn's channel releases an event to its readers only once the log other replicas replay holds it."""

from __future__ import annotations

import asyncio

import pytest

from ferryman.coordination.base import LocalFanout
from ferryman.engine.channel import TurnChannel
from ferryman.storage.base import StoredEvent

pytestmark = pytest.mark.anyio


def _held(channel: TurnChannel, count: int) -> list[StoredEvent]:
    events = [StoredEvent(seq, f"event {seq}") for seq in range(count)]
    for event in events:
        channel.hold(event)
    return events


async def test_held_events_reach_readers_in_order_once_stored() -> None:
    channel = TurnChannel()
    events = _held(channel, 3)
    assert channel.events == []  # what readers may see
    reader = channel.read()
    channel.stored(1)
    assert [await anext(reader), await anext(reader)] == events[:2]
    channel.stored(2)
    channel.close()
    assert [event async for event in reader] == events[2:]


async def test_after_a_refusal_nothing_more_is_released_and_the_run_stops_waiting() -> None:
    channel = TurnChannel()
    events = _held(channel, 4)
    channel.stored(0)
    waiting = asyncio.ensure_future(channel.drained())
    channel.refused(1)
    await asyncio.wait_for(waiting, 5)
    channel.stored(3)  # storage took the run's events: still not the refused ones
    channel.close()
    assert channel.lost
    assert [event async for event in channel.read()] == events[:1]


async def test_a_reader_stops_at_a_refusal_without_waiting_for_the_run_to_end() -> None:
    channel = TurnChannel()
    events = _held(channel, 3)
    channel.stored(0)
    reader = channel.read()
    assert await anext(reader) == events[0]
    channel.refused(1)  # the run goes on a while (never closed here): its reader moves on to the shared stream

    async def rest() -> list[StoredEvent]:
        return [event async for event in reader]

    assert await asyncio.wait_for(rest(), 5) == []


async def test_a_closed_channel_never_releases_what_it_still_holds() -> None:
    channel = TurnChannel()
    _held(channel, 2)
    channel.close()
    assert [event async for event in channel.read()] == []


async def test_a_lone_process_releases_each_event_at_once() -> None:
    channel = TurnChannel()
    fanout = LocalFanout()
    for event in _held(channel, 2):
        fanout.publish("turn:t", event.seq, event.data, channel)
    await asyncio.wait_for(channel.drained(), 5)
    assert [event.seq for event in channel.events] == [0, 1]
