"""The Redis fan-out between two "replicas" (two fan-outs on one real Redis)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from replicas import redis_database

from ferryman.coordination.base import CancelTurns, FanoutEntry, LiveFrame, ModelsChanged, Notice, Quiet, RunEnded
from ferryman.coordination.redis_fanout import RedisFanout
from ferryman.redis_url import split_prefix

pytestmark = pytest.mark.anyio


@pytest.fixture()
def anyio_backend() -> str:
    return "asyncio"


class Notices:
    """The notices one replica heard."""

    def __init__(self) -> None:
        self.heard: asyncio.Queue[Notice] = asyncio.Queue()

    async def __call__(self, notice: Notice) -> None:
        await self.heard.put(notice)


Replicas = tuple[RedisFanout, RedisFanout, Notices, Notices]


@pytest.fixture()
async def replicas() -> AsyncIterator[Replicas]:
    with redis_database() as prefixed:
        url, prefix = split_prefix(prefixed)
        async with _pair(url, prefix) as pair:
            yield pair


@contextlib.asynccontextmanager
async def _pair(url: str, prefix: str) -> AsyncIterator[Replicas]:
    a, b = RedisFanout(url, prefix, block_seconds=0.2), RedisFanout(url, prefix, block_seconds=0.2)
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
    assert everything == [LiveFrame(0, "frame 0"), LiveFrame(1, "frame 1"), LiveFrame(2, "frame 2"), RunEnded(2)]
    assert await asyncio.wait_for(_take(b.follow("turn:t1", 1), 2), 10) == [LiveFrame(2, "frame 2"), RunEnded(2)]
    # A resumed run continues the numbering on the same stream.
    a.publish("turn:t1", 3, "frame 3")
    assert await asyncio.wait_for(_take(b.follow("turn:t1", 2), 2), 10) == [RunEnded(2), LiveFrame(3, "frame 3")]


async def test_a_follower_waits_for_frames_published_later(
    replicas: Replicas,
) -> None:
    a, b, _, _ = replicas
    a.publish("response:r1", 0, "created")
    following = asyncio.ensure_future(_take(b.follow("response:r1", -1), 2))
    first = await asyncio.wait_for(_take(b.follow("response:r1", -1), 1), 10)
    assert first == [LiveFrame(0, "created")]
    a.publish("response:r1", 1, "completed")
    assert await asyncio.wait_for(following, 10) == [LiveFrame(0, "created"), LiveFrame(1, "completed")]


async def test_an_unknown_stream_is_reported_at_once(replicas: Replicas) -> None:
    _, b, _, _ = replicas
    entries = b.follow("turn:never-published", -1)
    assert await asyncio.wait_for(anext(entries), 5) == Quiet(known=False)
    await entries.aclose()


async def test_a_frame_published_twice_is_kept_once(replicas: Replicas) -> None:
    a, b, _, _ = replicas
    a.publish("turn:t2", 0, "first")
    a.publish("turn:t2", 0, "again")
    a.publish("turn:t2", 1, "second")
    got = await asyncio.wait_for(_take(b.follow("turn:t2", -1), 2), 10)
    assert got == [LiveFrame(0, "first"), LiveFrame(1, "second")]


async def test_a_notice_reaches_every_replica(
    replicas: Replicas,
) -> None:
    a, _, heard_a, heard_b = replicas
    await a.notify(CancelTurns("session-1", "the session was deleted"))
    await a.notify(ModelsChanged())
    for heard in (heard_b, heard_a):
        assert await asyncio.wait_for(heard.heard.get(), 10) == CancelTurns("session-1", "the session was deleted")
        assert await asyncio.wait_for(heard.heard.get(), 10) == ModelsChanged()


async def test_what_a_replica_published_can_be_read_back_whole(replicas: Replicas) -> None:
    a, b, _, _ = replicas
    for seq in range(3):
        a.publish("turn:t3", seq, f"frame {seq}")
    a.end_run("turn:t3", 2)
    await asyncio.wait_for(_take(b.follow("turn:t3", -1), 4), 10)  # all of it has reached Redis
    assert await b.recorded("turn:t3", -1) == [LiveFrame(seq, f"frame {seq}") for seq in range(3)]
    assert await b.recorded("turn:t3", 1) == [LiveFrame(2, "frame 2")]
    assert await b.recorded("turn:unknown", -1) == []
