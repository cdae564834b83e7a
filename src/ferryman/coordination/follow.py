"""Reading a stream that another replica runs: what storage holds, then what the fan-out brings."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from .base import Fanout, LiveFrame, RunEnded


def contiguous(recorded: list[LiveFrame], first: int) -> list[str]:
    """The frames numbered ``first``, ``first + 1``, … in ``recorded``, up to the first missing number."""
    frames: list[str] = []
    for live in recorded:
        if live.seq != first + len(frames):
            break
        frames.append(live.frame)
    return frames


async def follow_elsewhere(
    fanout: Fanout,
    stream: str,
    after: int,
    stored_after: Callable[[int], Awaitable[list[str]]],
    is_running: Callable[[], Awaitable[bool]],
) -> AsyncIterator[str]:
    """The frames of a stream numbered above ``after``: stored ones, then live ones from another replica.

    Stored frames come first; the fan-out then brings the rest as they are
    made. The stream stops at the end of a run once the storage says nothing
    runs any more (a resumed turn starts a new run on the same stream), or
    when the stream stays quiet twice while nothing runs (its replica died,
    or no replica published it). Whatever the storage holds beyond the last
    frame sent is sent at the end, so none is lost if the fan-out lost some.
    """
    last = after
    for frame in await stored_after(last):
        last += 1
        yield frame
    quiet_while_stopped = 0
    async for entry in fanout.follow(stream, last):
        if isinstance(entry, LiveFrame):
            if entry.seq > last + 1:  # the fan-out lost some (its stream expired): the storage may have them
                for frame in (await stored_after(last))[: entry.seq - last - 1]:
                    last += 1
                    yield frame
            if entry.seq > last:
                last = entry.seq
                yield entry.frame
            continue
        if await is_running():
            quiet_while_stopped = 0
            continue
        if isinstance(entry, RunEnded) or not entry.known:
            break
        quiet_while_stopped += 1
        if quiet_while_stopped >= 2:
            break
    for frame in await stored_after(last):
        last += 1
        yield frame
