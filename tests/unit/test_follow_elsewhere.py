"""Following a stream that another replica publishes: stored frames first, then live ones, none twice."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ferryman.coordination.base import FanoutEntry, Notice, NoticeHandler, Quiet, RunEnded
from ferryman.coordination.follow import contiguous, follow_elsewhere
from ferryman.redis_url import split_prefix
from ferryman.storage.base import StoredEvent

pytestmark = pytest.mark.anyio


class ScriptedFanout:
    """A fan-out whose follow yields a fixed script of entries (the stream as Redis would deliver it)."""

    def __init__(self, *entries: FanoutEntry) -> None:
        self.entries = list(entries)
        self.followed_after: list[int] = []

    async def open(self, on_notice: NoticeHandler) -> None:
        """Unused here."""

    async def close(self) -> None:
        """Unused here."""

    def publish(self, stream: str, seq: int, data: str) -> None:
        """Unused here."""

    def end_run(self, stream: str, seq: int) -> None:
        """Unused here."""

    async def follow(self, stream: str, after: int) -> AsyncIterator[FanoutEntry]:
        self.followed_after.append(after)
        for entry in self.entries:
            yield entry

    async def notify(self, notice: Notice) -> None:
        """Unused here."""

    async def recorded(self, stream: str, after: int) -> list[StoredEvent]:
        return []


class Turn:
    """Stored frames and a running flag that the script changes as it goes."""

    def __init__(self, stored: list[str], running: list[bool]) -> None:
        self.stored = stored
        self.running = running  # one answer per question; the last one repeats

    async def stored_after(self, last: int) -> list[StoredEvent]:
        return _numbered(self.stored)[last + 1 :]

    async def is_running(self) -> bool:
        return self.running.pop(0) if len(self.running) > 1 else self.running[0]


def _numbered(data: list[str]) -> list[StoredEvent]:
    return [StoredEvent(seq, item) for seq, item in enumerate(data)]


async def collect(fanout: ScriptedFanout, turn: Turn, after: int) -> list[str]:
    events = [event async for event in follow_elsewhere(fanout, "s", after, turn.stored_after, turn.is_running)]
    assert [event.seq for event in events] == list(range(after + 1, after + 1 + len(events)))
    return [event.data for event in events]


async def test_stored_frames_come_first_then_live_ones_without_duplicates() -> None:
    fanout = ScriptedFanout(StoredEvent(1, "f1"), StoredEvent(2, "f2"), StoredEvent(3, "f3"), RunEnded(3))
    turn = Turn(["f0", "f1"], running=[False])
    assert await collect(fanout, turn, -1) == ["f0", "f1", "f2", "f3"]
    assert fanout.followed_after == [1]


async def test_a_run_end_followed_by_a_resumed_run_is_read_through() -> None:
    fanout = ScriptedFanout(StoredEvent(0, "a"), RunEnded(0), StoredEvent(1, "b"), RunEnded(1))
    turn = Turn([], running=[True, False])
    assert await collect(fanout, turn, -1) == ["a", "b"]


async def test_a_stream_quiet_twice_while_nothing_runs_ends_with_what_storage_holds() -> None:
    fanout = ScriptedFanout(StoredEvent(0, "a"), Quiet(known=True), Quiet(known=True), StoredEvent(9, "never"))
    turn = Turn(["a", "b-stored-late"], running=[False])
    assert await collect(fanout, turn, -1) == ["a", "b-stored-late"]


async def test_quiet_while_the_turn_runs_keeps_waiting() -> None:
    fanout = ScriptedFanout(Quiet(known=True), Quiet(known=True), Quiet(known=True), StoredEvent(0, "a"), RunEnded(0))
    turn = Turn([], running=[True, True, True, False])
    assert await collect(fanout, turn, -1) == ["a"]


async def test_an_unknown_stream_of_a_finished_turn_ends_at_once() -> None:
    fanout = ScriptedFanout(Quiet(known=False), StoredEvent(5, "never"))
    turn = Turn(["a", "b"], running=[False])
    assert await collect(fanout, turn, 0) == ["b"]


async def test_frames_missing_from_the_stream_are_taken_from_storage() -> None:
    fanout = ScriptedFanout(StoredEvent(3, "d"), RunEnded(3))
    turn = Turn(["a"], running=[False])
    turn_stored_later = ["a", "b", "c", "d"]

    async def stored_after(last: int) -> list[StoredEvent]:
        stored = turn.stored if last < 0 else turn_stored_later
        return _numbered(stored)[last + 1 :]

    events = [event async for event in follow_elsewhere(fanout, "s", -1, stored_after, turn.is_running)]
    assert [(event.seq, event.data) for event in events] == [(0, "a"), (1, "b"), (2, "c"), (3, "d")]


def test_a_redis_url_names_its_key_prefix() -> None:
    assert split_prefix("redis://h:6379/0") == ("redis://h:6379/0", "ferryman:")
    assert split_prefix("redis://h:6379/0?prefix=team-a:&socket_timeout=5") == (
        "redis://h:6379/0?socket_timeout=5",
        "team-a:",
    )


def test_contiguous_frames_stop_at_the_first_missing_number() -> None:
    recorded = [StoredEvent(3, "d"), StoredEvent(4, "e"), StoredEvent(6, "g")]
    assert contiguous(recorded, 3) == ["d", "e"]
    assert contiguous(recorded, 2) == []
    assert contiguous([], 0) == []
