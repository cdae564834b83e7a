"""In-process indexes of the most recently searched vector stores, each kept current from the chunk feed.

One class serves every in-process index (keyword, vector): it keeps the
indexes of the last ``max_stores`` stores searched, asks the backend's feed
(:mod:`.chunk_feed`) for what changed since the version an index holds, and
applies that before the index is used. A replica therefore sees another's
writes at its next search, and a write costs the next search only what it
changed.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Generic, Protocol, TypeVar

from cachetools import LRUCache

from ferryman.storage.search.chunk_feed import ChunkChanges


class SyncedIndex(Protocol):
    """An index of one store's chunks that changes apply to."""

    version: int
    """The store's version it holds."""

    def apply(self, changes: ChunkChanges) -> None:
        """Bring the index to ``changes.version`` (see :mod:`.chunk_feed` for the order)."""
        ...


IndexT = TypeVar("IndexT", bound=SyncedIndex)
Feed = Callable[[int | None], Awaitable[ChunkChanges | None]]
"""The changes since a version (None: everything) of one store, or None when it does not exist."""


class SyncedIndexes(Generic[IndexT]):
    """The indexes of recently searched stores.

    Args:
        new: Makes an empty index (at version -1) for a store.
        max_stores: How many stores' indexes stay in memory.
    """

    def __init__(self, new: Callable[[], IndexT], max_stores: int = 32) -> None:
        self._new = new
        self._indexes: LRUCache[str, IndexT] = LRUCache(maxsize=max_stores)
        # A lock lives while a search holds or awaits it, and no longer: an evicted lock still held would let a
        # second search of the store run beside the first.
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @asynccontextmanager
    async def current(self, vector_store_id: str, feed: Feed) -> AsyncIterator[IndexT | None]:
        """The store's index, brought up to date, held while the block runs (None: no such store).

        Another search of the same store waits for the block: an index is never
        read while changes are applied to it.
        """
        lock = self._locks.get(vector_store_id)
        if lock is None:
            lock = self._locks[vector_store_id] = asyncio.Lock()
        async with lock:
            index = self._indexes.get(vector_store_id)
            changes = await feed(None if index is None else index.version)
            if changes is None:
                self.forget(vector_store_id)
                yield None
                return
            if index is None or changes.complete:
                index = self._new()
            if changes.version != index.version or changes.complete:
                # A change half applied leaves the index unknown: it is dropped, and the next search starts again.
                self.forget(vector_store_id)
                # Off the event loop: even one removal may start a compaction of the whole index.
                await asyncio.to_thread(index.apply, changes)
            self._indexes[vector_store_id] = index
            yield index

    def held(self, vector_store_id: str) -> IndexT | None:
        """The store's index as it stands (None: none is held), neither brought up to date nor locked."""
        return self._indexes.get(vector_store_id)

    def forget(self, vector_store_id: str) -> None:
        """Drop a store's index (it was deleted)."""
        self._indexes.pop(vector_store_id, None)
