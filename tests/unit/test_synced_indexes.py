"""The in-process indexes' cache: one search of a store at a time, and an index a failed change left is dropped."""

from __future__ import annotations

import asyncio

import pytest

from ferryman.storage.search.chunk_feed import ChunkChanges
from ferryman.storage.search.synced_indexes import Feed, SyncedIndexes

pytestmark = pytest.mark.anyio


class Probe:
    """An index that records the versions applied to it, and fails when told to."""

    def __init__(self) -> None:
        self.version = -1
        self.applied: list[int] = []
        self.fail = False

    def apply(self, changes: ChunkChanges) -> None:
        if self.fail:
            raise RuntimeError("half applied")
        self.applied.append(changes.version)
        self.version = changes.version


def answering(version: int) -> Feed:
    async def feed(since: int | None) -> ChunkChanges | None:
        return ChunkChanges(version, since is None, [], [])

    return feed


async def no_store(since: int | None) -> ChunkChanges | None:
    return None


async def test_a_store_held_by_a_search_is_not_entered_by_another_while_many_others_are_searched() -> None:
    indexes: SyncedIndexes[Probe] = SyncedIndexes(Probe, max_stores=1)
    inside, most = 0, 0
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(since: int | None) -> ChunkChanges | None:
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        entered.set()
        await release.wait()
        inside -= 1
        return ChunkChanges(1, True, [], [])

    async def search(store: str, feed: Feed) -> None:
        async with indexes.current(store, feed):
            pass

    first = asyncio.create_task(search("vs_a", slow))
    await entered.wait()
    for other in range(200):  # far more stores than the cache keeps, while vs_a's search is in its feed
        await search(f"vs_{other}", no_store)
    second = asyncio.create_task(search("vs_a", slow))
    for _ in range(10):  # loop turns, not time: the second search runs until it waits on something
        await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, second)
    assert most == 1


async def test_changes_apply_once_and_an_index_is_kept_between_searches() -> None:
    indexes: SyncedIndexes[Probe] = SyncedIndexes(Probe)
    async with indexes.current("vs_a", answering(5)) as index:
        assert index is not None and index.applied == [5]
    async with indexes.current("vs_a", answering(5)) as again:
        assert again is index and index.applied == [5]
    async with indexes.current("vs_a", no_store) as gone:
        assert gone is None


async def test_an_index_whose_change_failed_is_dropped_and_built_again() -> None:
    indexes: SyncedIndexes[Probe] = SyncedIndexes(Probe)
    async with indexes.current("vs_a", answering(5)) as index:
        assert index is not None
    index.fail = True
    with pytest.raises(RuntimeError, match="half applied"):
        async with indexes.current("vs_a", answering(6)):
            pass
    async with indexes.current("vs_a", answering(6)) as fresh:
        assert fresh is not None and fresh is not index and fresh.applied == [6]
