"""The Redis fan-out between two "replicas" (two fan-outs on one real Redis)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from redis.asyncio import Redis
from replicas import redis_database

from ferryman.coordination.base import (
    CancelTurns,
    FanoutEntry,
    ModelsChanged,
    Notice,
    Quiet,
    RecordDeleted,
    RunEnded,
)
from ferryman.coordination.redis_fanout import RedisFanout
from ferryman.engine.channel import TurnChannel
from ferryman.redis_url import split_prefix
from ferryman.storage.base import StoredEvent

pytestmark = pytest.mark.anyio


class Notices:
    """The notices one replica heard."""

    def __init__(self) -> None:
        self.heard: asyncio.Queue[Notice] = asyncio.Queue()

    async def __call__(self, notice: Notice) -> None:
        await self.heard.put(notice)


Replicas = tuple[RedisFanout, RedisFanout, Notices, Notices]


@pytest.fixture()
def redis_prefix() -> Iterator[tuple[str, str]]:
    """The test Redis and a fresh key prefix, its keys deleted afterwards."""
    with redis_database() as prefixed:
        yield split_prefix(prefixed)


@pytest.fixture()
async def replicas(redis_prefix: tuple[str, str]) -> AsyncIterator[Replicas]:
    url, prefix = redis_prefix
    async with _pair(url, url, prefix) as pair:
        yield pair


@contextlib.asynccontextmanager
async def _pair(url_a: str, url_b: str, prefix: str) -> AsyncIterator[Replicas]:
    a, b = RedisFanout(url_a, prefix, block_seconds=0.2), RedisFanout(url_b, prefix, block_seconds=0.2)
    heard_a, heard_b = Notices(), Notices()
    await a.open(heard_a)
    await b.open(heard_b)
    try:
        yield a, b, heard_a, heard_b
    finally:
        await a.close()
        await b.close()


async def _take(entries: AsyncIterator[FanoutEntry], count: int) -> list[FanoutEntry]:
    taken: list[FanoutEntry] = []
    async for entry in entries:
        if not isinstance(entry, Quiet):
            taken.append(entry)
        if len(taken) == count:
            break
    return taken


async def test_frames_published_on_one_replica_are_followed_on_the_other_from_any_point(
    replicas: Replicas,
) -> None:
    a, b, _, _ = replicas
    for seq in range(3):
        a.publish("turn:t1", seq, f"frame {seq}")
    a.end_run("turn:t1", 2)
    everything = await asyncio.wait_for(_take(b.follow("turn:t1", -1), 4), 10)
    assert everything == [StoredEvent(0, "frame 0"), StoredEvent(1, "frame 1"), StoredEvent(2, "frame 2"), RunEnded(2)]
    assert await asyncio.wait_for(_take(b.follow("turn:t1", 1), 2), 10) == [StoredEvent(2, "frame 2"), RunEnded(2)]
    # A resumed run continues the numbering on the same stream.
    a.publish("turn:t1", 3, "frame 3")
    assert await asyncio.wait_for(_take(b.follow("turn:t1", 2), 2), 10) == [RunEnded(2), StoredEvent(3, "frame 3")]


async def test_waiting_for_a_runs_end_answers_the_events_the_stream_held_then(replicas: Replicas) -> None:
    a, b, _, _ = replicas
    assert await asyncio.wait_for(b.wait_run_end("turn:unknown"), 10) is None
    watcher = Watcher()
    for seq in range(3):
        a.publish("turn:t6", seq, f"frame {seq}", watcher)
    await watcher.until(lambda: watcher.stored_through == 2)
    waiting = asyncio.ensure_future(b.wait_run_end("turn:t6"))  # the run goes on: nothing ended yet
    a.end_run("turn:t6", 2)
    assert await asyncio.wait_for(waiting, 10) == 3
    assert await asyncio.wait_for(b.wait_run_end("turn:t6"), 10) == 3  # ended already: at once
    a.publish("turn:t6", 3, "frame 3")  # a resumed run numbers on
    a.end_run("turn:t6", 3)
    assert await asyncio.wait_for(b.wait_run_end("turn:t6"), 10) == 4


async def test_a_follower_waits_for_frames_published_later(
    replicas: Replicas,
) -> None:
    a, b, _, _ = replicas
    a.publish("response:r1", 0, "created")
    following = asyncio.ensure_future(_take(b.follow("response:r1", -1), 2))
    first = await asyncio.wait_for(_take(b.follow("response:r1", -1), 1), 10)
    assert first == [StoredEvent(0, "created")]
    a.publish("response:r1", 1, "completed")
    assert await asyncio.wait_for(following, 10) == [StoredEvent(0, "created"), StoredEvent(1, "completed")]


async def test_an_unknown_stream_is_reported_at_once(replicas: Replicas) -> None:
    _, b, _, _ = replicas
    entries = b.follow("turn:never-published", -1)
    assert await asyncio.wait_for(anext(entries), 5) == Quiet(known=False)
    await entries.aclose()


class Watcher:
    """What a run's channel hears from the fan-out: how far its events are stored, or that one was refused."""

    def __init__(self) -> None:
        self.lost = False
        self.closed = False
        self.stored_through = -1
        self.refused_at: int | None = None
        self._changed = asyncio.Event()

    def stored(self, seq: int) -> None:
        self.stored_through = seq
        self._changed.set()

    def refused(self, seq: int) -> None:
        self.lost, self.refused_at = True, seq
        self._changed.set()

    async def until(self, check: Callable[[], bool]) -> None:
        async with asyncio.timeout(10):
            while not check():
                self._changed.clear()
                await self._changed.wait()


async def test_a_frame_published_twice_is_kept_once(replicas: Replicas) -> None:
    a, b, _, _ = replicas
    watcher = Watcher()
    a.publish("turn:t2", 0, "first", watcher)
    a.publish("turn:t2", 0, "first", watcher)  # a retried write of the same event counts as stored
    a.publish("turn:t2", 1, "second", watcher)
    await watcher.until(lambda: watcher.stored_through == 1)
    got = await asyncio.wait_for(_take(b.follow("turn:t2", -1), 2), 10)
    assert got == [StoredEvent(0, "first"), StoredEvent(1, "second")]
    assert not watcher.lost


async def test_a_run_is_told_its_events_once_the_stream_holds_them(replicas: Replicas) -> None:
    a, b, _, _ = replicas
    channel = TurnChannel()
    for seq in range(3):
        channel.hold(StoredEvent(seq, f"frame {seq}"))
        a.publish("turn:t6", seq, f"frame {seq}", channel)
    assert channel.events == []  # nothing is released before Redis answered
    released = await asyncio.wait_for(_take(channel.read(), 3), 10)
    assert released == [StoredEvent(seq, f"frame {seq}") for seq in range(3)]
    assert await b.recorded("turn:t6", -1) == released


async def test_an_event_whose_number_another_replica_took_is_refused_with_the_rest_of_its_run(
    replicas: Replicas, redis_prefix: tuple[str, str]
) -> None:
    a, b, _, _ = replicas
    a.publish("turn:t5", 0, "turn started")
    # b fails the turn of a replica it believes dead: its failure takes number 1 and ends the run.
    await asyncio.wait_for(_take(b.follow("turn:t5", -1), 1), 10)
    assert await b.append("turn:t5", 1, ["failed: interrupted"])
    watcher = Watcher()
    a.publish("turn:t5", 1, "step started", watcher)
    a.end_run("turn:t5", 1, watcher)
    await watcher.until(lambda: watcher.lost)
    a.publish("turn:t5", 2, "a later step", watcher)
    a.end_run("turn:t5", 2, watcher)
    assert (watcher.refused_at, watcher.stored_through) == (1, -1)
    assert await b.recorded("turn:t5", -1) == [StoredEvent(0, "turn started"), StoredEvent(1, "failed: interrupted")]
    # Nothing of a's run was written after b's end of the stream, even after the refusal.
    await a.close()  # sends (or drops) all it queued
    url, prefix = redis_prefix
    admin = Redis.from_url(url, decode_responses=True)
    try:
        entries = await admin.xrange(f"{prefix}stream:turn:t5")
    finally:
        await admin.aclose()
    assert [entry_id for entry_id, _ in entries] == ["0-1", "1-1", "1-2"]
    # Appending where the stream already holds an event is refused too, storing nothing.
    assert not await b.append("turn:t5", 1, ["failed again"])
    assert await b.recorded("turn:t5", 0) == [StoredEvent(1, "failed: interrupted")]


async def test_a_notice_reaches_every_replica(
    replicas: Replicas,
) -> None:
    a, _, heard_a, heard_b = replicas
    await a.notify(CancelTurns("session-1", "the session was deleted"))
    await a.notify(ModelsChanged())
    await a.notify(RecordDeleted("resp-1", "response"))
    for heard in (heard_b, heard_a):
        assert await asyncio.wait_for(heard.heard.get(), 10) == CancelTurns("session-1", "the session was deleted")
        assert await asyncio.wait_for(heard.heard.get(), 10) == ModelsChanged()
        assert await asyncio.wait_for(heard.heard.get(), 10) == RecordDeleted("resp-1", "response")


async def test_what_a_replica_published_can_be_read_back_whole(replicas: Replicas) -> None:
    a, b, _, _ = replicas
    for seq in range(3):
        a.publish("turn:t3", seq, f"frame {seq}")
    a.end_run("turn:t3", 2)
    await asyncio.wait_for(_take(b.follow("turn:t3", -1), 4), 10)  # all of it has reached Redis
    assert await b.recorded("turn:t3", -1) == [StoredEvent(seq, f"frame {seq}") for seq in range(3)]
    assert await b.recorded("turn:t3", 1) == [StoredEvent(2, "frame 2")]
    assert await b.recorded("turn:unknown", -1) == []


async def test_a_replica_that_lost_the_notice_channel_subscribes_again(redis_prefix: tuple[str, str]) -> None:
    url, prefix = redis_prefix
    name = f"fanout-test-{uuid.uuid4().hex[:8]}"
    async with _pair(f"{url}?client_name={name}", url, prefix) as (_, b, heard_a, _):
        await _kill_subscriptions_named(url, name)
        # The lost channel is reported as a change of registrations and as deletions of anything,
        # since notices may have been missed.
        assert await asyncio.wait_for(heard_a.heard.get(), 10) == ModelsChanged()
        assert await asyncio.wait_for(heard_a.heard.get(), 10) == RecordDeleted(None)
        await b.notify(CancelTurns("agent-9", "deleted"))
        assert await asyncio.wait_for(heard_a.heard.get(), 10) == CancelTurns("agent-9", "deleted")


async def _kill_subscriptions_named(url: str, name: str) -> None:
    """Drop, server side, the subscribed connections of the clients called ``name`` (as a network cut would)."""
    admin = Redis.from_url(url, decode_responses=True)
    try:
        listing = await admin.execute_command("CLIENT", "LIST", "TYPE", "pubsub")
        ids = [
            fields["id"]
            for fields in (dict(part.split("=", 1) for part in line.split()) for line in listing.splitlines())
            if fields.get("name") == name
        ]
        assert ids, f"no subscription of {name} found"
        for client_id in ids:
            await admin.execute_command("CLIENT", "KILL", "ID", client_id)
    finally:
        await admin.aclose()


async def test_closing_sends_what_is_still_queued(redis_prefix: tuple[str, str]) -> None:
    url, prefix = redis_prefix
    async with _pair(url, url, prefix) as (a, b, _, _):
        closing = RedisFanout(url, prefix)
        await closing.open(Notices())
        for seq in range(300):
            closing.publish("turn:t4", seq, f"frame {seq}")
        closing.end_run("turn:t4", 299)
        await closing.close()
        frames = await b.recorded("turn:t4", -1)
        assert [frame.seq for frame in frames] == list(range(300))
