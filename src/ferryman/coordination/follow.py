"""Reading a stream that another replica runs: what storage holds, then what the fan-out brings."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from ferryman.storage.base import StoredEvent

from .base import Fanout, RunEnded


def contiguous(recorded: list[StoredEvent], first: int) -> list[str]:
    """The data of the events numbered ``first``, ``first + 1``, … in ``recorded``, up to the first missing number."""
    events: list[str] = []
    for event in recorded:
        if event.seq != first + len(events):
            break
        events.append(event.data)
    return events


async def follow_elsewhere(
    fanout: Fanout,
    stream: str,
    after: int,
    stored_after: Callable[[int], Awaitable[list[StoredEvent]]],
    is_running: Callable[[], Awaitable[bool]],
) -> AsyncIterator[StoredEvent]:
    """The events of a stream numbered above ``after``: stored ones, then live ones from another replica.

    Stored events come first; the fan-out then brings the rest as they are
    made. The stream stops at the end of a run once the storage says nothing
    runs any more (a resumed turn starts a new run on the same stream), or
    when the stream stays quiet twice while nothing runs (its replica died,
    or no replica published it). Whatever the storage holds beyond the last
    event sent is sent at the end, so none is lost if the fan-out lost some.
    """
    last = after
    for event in await stored_after(last):
        last = event.seq
        yield event
    quiet_while_stopped = 0
    async for entry in fanout.follow(stream, last):
        if isinstance(entry, StoredEvent):
            if entry.seq > last + 1:  # the fan-out lost some (its stream expired): the storage may have them
                for event in await stored_after(last):
                    if event.seq >= entry.seq:
                        break
                    last = event.seq
                    yield event
            if entry.seq > last:
                last = entry.seq
                yield entry
            continue
        if await is_running():
            quiet_while_stopped = 0
            continue
        if isinstance(entry, RunEnded) or not entry.known:
            break
        quiet_while_stopped += 1
        if quiet_while_stopped >= 2:
            break
    for event in await stored_after(last):
        last = event.seq
        yield event
