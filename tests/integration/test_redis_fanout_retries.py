"""The Redis fan-out's sender when Redis refuses or stalls its writes: it retries, in order, within bounds."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from redis.asyncio import Redis
from redis_link import RedisLink
from replicas import redis_database

from ferryman.coordination import redis_fanout
from ferryman.coordination.base import Notice
from ferryman.coordination.redis_fanout import RedisFanout
from ferryman.engine.channel import TurnChannel
from ferryman.redis_url import split_prefix
from ferryman.storage.base import StoredEvent

pytestmark = pytest.mark.anyio


async def _ignore(_: Notice) -> None:
    """Notices play no part here."""


@pytest.fixture()
def redis_prefix() -> Iterator[tuple[str, str]]:
    """The test Redis and a fresh key prefix, its keys deleted afterwards."""
    with redis_database() as prefixed:
        yield split_prefix(prefixed)


class Warned(logging.Handler):
    """Set once the fan-out warns (a batch it could not store yet, or an event refused)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.event.set()

    async def wait(self) -> None:
        await asyncio.wait_for(self.event.wait(), 10)


@pytest.fixture()
def warned() -> Iterator[Warned]:
    handler = Warned()
    logger = logging.getLogger(redis_fanout.__name__)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@contextlib.asynccontextmanager
async def _refusing_xadd(url: str) -> AsyncIterator[tuple[str, Callable[[], Awaitable[None]]]]:
    """A Redis user that may do anything but XADD (as an out-of-memory or read-only Redis refuses writes).

    Yields its URL, and what grants it XADD.
    """
    name, password = f"ferryman-test-{uuid.uuid4().hex}", uuid.uuid4().hex
    admin = Redis.from_url(url, decode_responses=True)
    await admin.execute_command("ACL", "SETUSER", name, "on", f">{password}", "~*", "&*", "+@all", "-xadd")

    async def grant() -> None:
        await admin.execute_command("ACL", "SETUSER", name, "+xadd")

    parts = urlsplit(url)
    try:
        yield urlunsplit(parts._replace(netloc=f"{name}:{password}@{parts.hostname}:{parts.port or 6379}")), grant
    finally:
        await admin.execute_command("ACL", "DELUSER", name)
        await admin.aclose()


@contextlib.asynccontextmanager
async def _fanout(url: str, prefix: str, block_seconds: float = 0.2) -> AsyncIterator[RedisFanout]:
    fanout = RedisFanout(url, prefix, block_seconds=block_seconds)
    await fanout.open(_ignore)
    try:
        yield fanout
    finally:
        await fanout.close()


async def _recorded(url: str, prefix: str, stream: str) -> list[StoredEvent]:
    async with _fanout(url, prefix) as reader:
        return await reader.recorded(stream, -1)


def _held(channel: TurnChannel, fanout: RedisFanout, stream: str, seqs: range) -> None:
    for seq in seqs:
        channel.hold(StoredEvent(seq, f"frame {seq}"))
        fanout.publish(stream, seq, f"frame {seq}", channel)


async def test_a_write_refused_for_another_reason_than_its_number_is_retried_not_taken_as_lost(
    redis_prefix: tuple[str, str], warned: Warned
) -> None:
    url, prefix = redis_prefix
    async with _refusing_xadd(url) as (user_url, grant), _fanout(user_url, prefix) as fanout:
        channel = TurnChannel()
        _held(channel, fanout, "turn:t1", range(2))
        await warned.wait()
        assert not channel.lost  # no other replica took the number: the run's events are still to come
        await grant()
        await asyncio.wait_for(channel.drained(), 10)
        assert not channel.lost
        assert channel.events == [StoredEvent(0, "frame 0"), StoredEvent(1, "frame 1")]


async def test_closing_sends_the_batch_being_retried_before_what_came_after_it(
    redis_prefix: tuple[str, str], warned: Warned, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_fanout, "_CLOSE_SECONDS", 0.2)
    url, prefix = redis_prefix
    async with _refusing_xadd(url) as (user_url, grant):
        # The sender waits long between tries: it is still waiting to retry its batch at close.
        async with _fanout(user_url, prefix, block_seconds=60) as fanout:
            fanout.publish("turn:t2", 0, "frame 0")
            fanout.publish("turn:t2", 1, "frame 1")
            await warned.wait()
            fanout.publish("turn:t2", 2, "frame 2")
            fanout.end_run("turn:t2", 2)
            await grant()
        assert [event.seq for event in await _recorded(url, prefix, "turn:t2")] == [0, 1, 2]


async def test_while_redis_refuses_writes_the_events_of_settled_runs_are_not_kept(
    redis_prefix: tuple[str, str], warned: Warned
) -> None:
    url, prefix = redis_prefix
    async with _refusing_xadd(url) as (user_url, grant), _fanout(user_url, prefix) as fanout:
        settled, live = TurnChannel(), TurnChannel()
        _held(settled, fanout, "turn:settled", range(2))
        _held(live, fanout, "turn:live", range(1))
        await warned.wait()
        settled.close()  # its run ended: storage holds its events
        fanout.end_run("turn:settled", 1, settled)  # came while Redis refused: joins the retry, dropped too
        _held(live, fanout, "turn:live", range(1, 2))
        await grant()
        await asyncio.wait_for(live.drained(), 10)
        assert [event.seq for event in live.events] == [0, 1]
        assert await fanout.recorded("turn:settled", -1) == []


async def test_a_batch_that_redis_does_not_answer_is_sent_again(
    redis_prefix: tuple[str, str], warned: Warned, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_fanout, "_SEND_SECONDS", 0.2)
    url, prefix = redis_prefix
    with RedisLink(url) as link:
        patient = f"{link.through(url)}{'&' if '?' in url else '?'}socket_timeout=60"  # as a URL may ask
        async with _fanout(patient, prefix) as fanout:
            channel = TurnChannel()
            link.hold(60)  # what the fan-out sends waits, as on a network that dropped it
            _held(channel, fanout, "turn:t3", range(1))
            await warned.wait()  # long before the hold ends
            link.cut()  # the stalled connection is gone; the next try flows
            await asyncio.wait_for(channel.drained(), 10)
            assert channel.events == [StoredEvent(0, "frame 0")]


async def test_a_redis_that_does_not_know_the_append_script_yet_is_taught_it(
    redis_prefix: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A script text no Redis has run: as for a new Redis, or one restarted since the replica started.
    monkeypatch.setattr(redis_fanout, "_APPEND", f"{redis_fanout._APPEND}-- {uuid.uuid4().hex}\n")
    url, prefix = redis_prefix
    async with _fanout(url, prefix) as fanout:
        channel = TurnChannel()
        _held(channel, fanout, "turn:t4", range(2))
        await asyncio.wait_for(channel.drained(), 10)
        assert channel.events == [StoredEvent(0, "frame 0"), StoredEvent(1, "frame 1")]


async def test_an_event_numbered_below_what_another_replica_wrote_is_refused_not_retried(
    redis_prefix: tuple[str, str],
) -> None:
    url, prefix = redis_prefix
    async with _fanout(url, prefix) as a, _fanout(url, prefix) as b:
        # b failed the turn after events it read elsewhere (storage): the stream skips a's numbers.
        assert await b.append("turn:t5", 2, ["failed: interrupted"])
        channel = TurnChannel()
        _held(channel, a, "turn:t5", range(1))
        await asyncio.wait_for(channel.drained(), 10)
        assert channel.lost
        assert channel.events == []
