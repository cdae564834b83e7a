"""Vector search in process over one store's chunks, kept current from the chunk feed.

Backends without a vector index of their own (SQLite as Python ships it cannot
load extensions; Redis without modules) search here. A :class:`VectorIndex`
holds the store's unit-length embeddings in one float32 matrix, one row per
*slot*; a removed chunk's slot is reused by a later one. Below
``ann_threshold`` chunks (250,000 by default) a search is exact (one matrix
product, BLAS's on the searching thread: 10-13 ms at 100,000 chunks of 384
dimensions on a busy 2-core machine, and
nothing to build: a graph of 100,000 chunks took 40 s or more of CPU, paid by a
replica's first search of the store under the store's lock, and each write of
500 chunks costs it about half a second). From there on an HNSW graph
(usearch) is kept beside the matrix, its keys the slots, changed in place by
each write: a removal deletes the chunk's node, an addition inserts one;
nothing is rebuilt. A large graph (a replica's first search of a big store,
or a store growing past the threshold) is built on a thread of its own, off
the store's lock: searches stay exact meanwhile, and the writes made during
the build are applied to the graph when it is taken up. Whatever the path,
the scores returned are recomputed from the matrix, so they are the exact
cosine of the chunks returned.

Changes to an index are serialised by its owner (:class:`.synced_indexes.SyncedIndexes`
holds a lock around both :meth:`VectorIndex.apply` and :meth:`VectorIndex.nearest`).
"""

from __future__ import annotations

import atexit
import logging
import math
import threading
import weakref
from concurrent.futures import Future
from itertools import chain
from typing import TYPE_CHECKING

from ferryman.blas import hold_to_callers
from ferryman.storage.search.chunk_feed import ChunkChanges, ChunkEntry, ChunkRemoval

if TYPE_CHECKING:
    import numpy as np
    from usearch.index import Index

# numpy and usearch are imported when first needed: an empty index (one per store searched) costs neither, and
# usearch (70 ms to import, its SIMD kernels) loads only for a store past ``ann_threshold``.

_FIRST_CAPACITY = 1024
_DECODED_AT_ONCE = 1 << 15
"""Embeddings decoded per step of a large write: a whole store's at once would hold it twice more (50 MB here)."""
_OVER_FETCH = 4
"""Under a file filter, the graph is asked for this many times the chunks the filter would keep of ``limit``.

Twice gave recall@10 0.947 for a filter keeping a tenth of 30k clustered vectors (384 dimensions); four times 0.977.
"""
_MAX_FETCHED = 1000
"""Beyond this many candidates (a filter keeping under 4% of the store, for 10), the selection is searched exactly."""
_PARALLEL_ADD = 256
"""Insertions into the graph in one batch from which usearch spreads them over every core (below: one thread).

A write's 500 chunks took 190-205 ms on one thread and 107-113 ms on both cores of the 2-core machine (a graph of
100,000 chunks of 384 dimensions); the search right after the write waits for them. Below a few hundred, starting
the threads is a larger share of the little there is to do."""
_BUILT_AT_ONCE = 8192
"""Rows a background build copies out of the matrix and inserts per step (12 MB at 384 dimensions, a second or
so of both cores): between steps it sees that it was cancelled."""

log = logging.getLogger(__name__)

_ONE_BUILD = threading.Lock()
"""Graphs are built one at a time in a process: each takes every core."""
_BUILDERS: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
_EXITING = threading.Event()


class BuildCancelled(Exception):  # noqa: N818  (not an error: nobody wants the graph any more)
    """A background graph build stopped because its index was reset or dropped, or the process is exiting."""


@atexit.register
def _stop_builds() -> None:
    # A thread still inside usearch when the interpreter goes away aborts the process: each builder stops at the
    # end of its step, and is waited for here.
    _EXITING.set()
    for builder in list(_BUILDERS):
        builder.join(timeout=30)


class VectorIndex:
    """One store's embeddings: exact search when small, an HNSW graph beside them when large.

    Args:
        ann_threshold: From how many chunks the graph is kept (and dropped again below half of it).
        exact_file_limit: A file filter that selects at most this many chunks is searched exactly.
        connectivity: The graph's edges per node (HNSW's M).
        expansion_add: Candidates considered when inserting a node (HNSW's efConstruction).
        expansion_search: Candidates considered when searching (HNSW's ef), at least the count asked for.
        background_from: A graph of at least this many chunks is built on a thread of its own while searches
            stay exact (smaller ones take well under a second: built in place).
    """

    def __init__(
        self,
        *,
        ann_threshold: int = 250_000,
        exact_file_limit: int = 10_000,
        connectivity: int = 16,
        expansion_add: int = 64,
        expansion_search: int = 128,
        background_from: int = 20_000,
    ) -> None:
        self.version = -1
        self._ann_threshold = ann_threshold
        self._background_from = background_from
        self._exact_file_limit = exact_file_limit
        self._connectivity = connectivity
        self._expansion_add = expansion_add
        self._expansion_search = expansion_search
        self._reset()

    def __len__(self) -> int:
        return len(self._slot_of)

    @property
    def approximate(self) -> bool:
        """Whether searches without a selective file filter go through the graph."""
        self._take_up_built_graph()
        return self._graph is not None

    def wait_for_graph(self, timeout: float | None = None) -> bool:
        """Wait until no graph is being built (True), or ``timeout`` seconds (False); for tests and tools."""
        building = self._building
        if building is None:
            return True
        try:
            building.exception(timeout)
        except TimeoutError:
            return False
        return True

    def apply(self, changes: ChunkChanges) -> None:
        """Bring the index to ``changes.version`` (removals first, then additions; see :mod:`.chunk_feed`).

        Added chunks without an embedding, or with one of another dimension than the index's, are not held.
        """
        if changes.complete:
            self._reset()
        for removal in changes.removed:
            self._remove(removal)
        if changes.added:
            self._add(changes.added)
        self._sync_graph()
        self.version = changes.version

    def nearest(self, embedding: list[float], file_ids: list[str] | None, limit: int) -> list[tuple[str, float]]:
        """``(chunk_id, cosine similarity)`` of the ``limit`` chunks nearest ``embedding``, best first.

        Args:
            embedding: The query; one of another dimension than the index's finds nothing.
            file_ids: Only chunks of these files (None: every chunk).
            limit: How many chunks at most.
        """
        import numpy as np

        self._take_up_built_graph()
        if limit <= 0 or not self._slot_of or self._vectors is None or file_ids == []:
            return []
        query = np.asarray(embedding, dtype=np.float32)
        if query.ndim != 1 or query.shape[0] != self._vectors.shape[1]:
            return []
        norm = float(np.linalg.norm(query))
        if norm > 0:
            query = query / np.float32(norm)
        slots: np.ndarray | None = None
        if file_ids is None:
            if self._graph is not None:
                slots = self._search_graph(query, limit, None)
        else:
            wanted = set(file_ids)
            selected = sum(len(self._file_slots.get(file_id, ())) for file_id in wanted)
            slots = None
            if self._graph is not None and selected > self._exact_file_limit:
                slots = self._search_graph(query, limit, wanted, selected)
            if slots is None:
                slots = self._file_rows(wanted)
        return self._ranked(query, slots, limit)

    def _reset(self) -> None:
        self._vectors: np.ndarray | None = None
        self._live: np.ndarray | None = None
        self._versions: np.ndarray | None = None
        self._chunk_ids: list[str | None] = []
        self._file_of: list[str | None] = []
        self._slot_of: dict[str, int] = {}
        self._file_slots: dict[str, set[int]] = {}
        self._free: list[int] = []
        self._graph: Index | None = None
        self._touched: dict[int, bool] = {}
        """Slots changed since the graph was last synced, each with whether the graph held it then."""
        stop: weakref.finalize[[], VectorIndex] | None = getattr(self, "_stop_build", None)
        if stop is not None:
            stop()  # cancels the build under way, once
        self._building: Future[Index] | None = None
        """A graph being built on its own thread from the rows live when it began (None: none is)."""
        self._stop_build: weakref.finalize[[], VectorIndex] | None = None
        """Cancels that build (also called when the index is dropped)."""
        self._since_building: dict[int, bool] = {}
        """Slots changed since that build began, each with whether it was live then."""

    def _remove(self, removal: ChunkRemoval) -> None:
        if self._versions is None:
            return
        if removal.chunk_id is not None:
            slot = self._slot_of.get(removal.chunk_id)
            slots = [] if slot is None else [slot]
        else:
            slots = list(self._file_slots.get(removal.file_id, ()))
        for slot in slots:
            if self._versions[slot] < removal.version:
                self._release(slot)

    def _add(self, entries: list[ChunkEntry]) -> None:
        import numpy as np

        latest = {entry.chunk_id: entry for entry in entries}
        for chunk_id in latest:
            slot = self._slot_of.get(chunk_id)
            if slot is not None:
                self._release(slot)
        if self._vectors is None:
            first = next((entry for entry in latest.values() if entry.embedding), None)
            if first is None:
                return
            self._allocate_rows(len(first.embedding) // 4, len(latest))
        assert self._vectors is not None and self._versions is not None
        size = self._vectors.shape[1] * 4
        held = [entry for entry in latest.values() if len(entry.embedding) == size]
        self._grow(len(held))
        for start in range(0, len(held), _DECODED_AT_ONCE):
            part = held[start : start + _DECODED_AT_ONCE]
            vectors = np.frombuffer(b"".join(entry.embedding for entry in part), dtype="<f4").reshape(len(part), -1)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            slots = np.fromiter((self._claim(entry) for entry in part), dtype=np.int64, count=len(part))
            self._vectors[slots] = vectors / np.where(norms > 0, norms, 1).astype(np.float32)
            self._versions[slots] = [entry.version for entry in part]

    def _claim(self, entry: ChunkEntry) -> int:
        assert self._live is not None
        if self._free:
            slot = self._free.pop()
            self._chunk_ids[slot] = entry.chunk_id
            self._file_of[slot] = entry.file_id
        else:
            slot = len(self._chunk_ids)
            self._chunk_ids.append(entry.chunk_id)
            self._file_of.append(entry.file_id)
        self._touched.setdefault(slot, False)
        self._live[slot] = True
        self._slot_of[entry.chunk_id] = slot
        self._file_slots.setdefault(entry.file_id, set()).add(slot)
        return slot

    def _release(self, slot: int) -> None:
        assert self._live is not None
        chunk_id, file_id = self._chunk_ids[slot], self._file_of[slot]
        assert chunk_id is not None and file_id is not None
        self._touched.setdefault(slot, True)
        self._live[slot] = False
        del self._slot_of[chunk_id]
        in_file = self._file_slots[file_id]
        in_file.discard(slot)
        if not in_file:
            del self._file_slots[file_id]
        self._chunk_ids[slot] = self._file_of[slot] = None
        self._free.append(slot)

    def _allocate_rows(self, dimension: int, capacity: int) -> None:
        import numpy as np

        capacity = max(capacity, _FIRST_CAPACITY)
        self._vectors = np.zeros((capacity, dimension), dtype=np.float32)
        self._live = np.zeros(capacity, dtype=bool)
        self._versions = np.zeros(capacity, dtype=np.int64)

    def _grow(self, more: int) -> None:
        import numpy as np

        assert self._vectors is not None and self._live is not None and self._versions is not None
        needed = len(self._chunk_ids) + max(0, more - len(self._free))
        capacity = self._vectors.shape[0]
        if needed <= capacity:
            return
        capacity = max(needed, capacity + capacity // 2)
        vectors = np.zeros((capacity, self._vectors.shape[1]), dtype=np.float32)
        vectors[: len(self._vectors)] = self._vectors
        self._vectors = vectors
        self._live = np.concatenate([self._live, np.zeros(capacity - len(self._live), dtype=bool)])
        self._versions = np.concatenate([self._versions, np.zeros(capacity - len(self._versions), dtype=np.int64)])

    def _sync_graph(self) -> None:
        touched, self._touched = self._touched, {}
        if self._graph is None:
            if self._building is not None:
                for slot, held in touched.items():
                    self._since_building.setdefault(slot, held)
                self._take_up_built_graph()
            elif len(self._slot_of) >= self._ann_threshold:
                self._build_graph()
            return
        if len(self._slot_of) < self._ann_threshold // 2:
            self._graph = None
            return
        self._catch_up(touched)

    def _catch_up(self, touched: dict[int, bool]) -> None:
        """Bring the graph up to these changed slots (each with whether the graph held it): out, then in if live."""
        import numpy as np

        assert self._live is not None and self._graph is not None
        gone = [slot for slot, held in touched.items() if held]
        if gone:
            self._graph.remove(np.asarray(gone, dtype=np.uint64))
        added = np.asarray([slot for slot in touched if self._live[slot]], dtype=np.int64)
        if len(added):
            self._insert(added)

    def _new_graph(self) -> Index:
        from usearch.index import Index

        assert self._vectors is not None
        return Index(
            ndim=self._vectors.shape[1],
            metric="cos",
            dtype="f16",
            connectivity=self._connectivity,
            expansion_add=self._expansion_add,
            expansion_search=self._expansion_search,
        )

    def _build_graph(self) -> None:
        import numpy as np

        assert self._vectors is not None and self._live is not None
        slots = np.flatnonzero(self._live[: len(self._chunk_ids)])
        if len(slots) < self._background_from:
            self._graph = self._new_graph()
            self._insert(slots)
            return
        # The builder reads this matrix while writes go on: a later _grow makes a new one, and a row rewritten
        # meanwhile is among the slots changed since, which the graph is brought up to when it is taken up.
        building: Future[Index] = Future()
        cancelled = threading.Event()
        graph, vectors = self._new_graph(), self._vectors
        builder = threading.Thread(
            target=_fill, args=(graph, vectors, slots, building, cancelled), name="vector-graph", daemon=True
        )
        builder.start()
        _BUILDERS.add(builder)
        self._building, self._since_building = building, {}
        # An index dropped (evicted, forgotten) stops its build; the hook is detached once the build is over.
        self._stop_build = weakref.finalize(self, cancelled.set)

    def _take_up_built_graph(self) -> None:
        """Once the graph being built is done, use it, brought up to the writes made since it began."""
        building = self._building
        if building is None or not building.done():
            return
        self._building = None
        if self._stop_build is not None:
            self._stop_build.detach()
            self._stop_build = None
        since, self._since_building = self._since_building, {}
        failure = building.exception()
        if failure is not None:  # searches stay exact; the next write that syncs tries again
            if not isinstance(failure, BuildCancelled):
                log.error("building a vector graph failed", exc_info=failure)
            return
        if len(self._slot_of) < self._ann_threshold // 2:
            return
        self._graph = building.result()
        self._catch_up(since)

    def _insert(self, slots: np.ndarray) -> None:
        import numpy as np

        assert self._vectors is not None and self._graph is not None
        threads = 0 if len(slots) >= _PARALLEL_ADD else 1
        self._graph.add(slots.astype(np.uint64), self._vectors[slots], threads=threads)

    def _file_rows(self, file_ids: set[str]) -> np.ndarray:
        import numpy as np

        sets = [self._file_slots[file_id] for file_id in file_ids if file_id in self._file_slots]
        return np.fromiter(chain.from_iterable(sets), dtype=np.int64, count=sum(map(len, sets)))

    def _search_graph(
        self, query: np.ndarray, limit: int, file_ids: set[str] | None, selected: int = 0
    ) -> np.ndarray | None:
        """Candidate slots from the graph, over-fetched in proportion to how little a file filter keeps.

        None when that would fetch too many, or the filtered candidates fall short of ``limit``: the caller
        searches the selection exactly.
        """
        import numpy as np

        assert self._graph is not None
        count = limit
        if file_ids is not None:
            count = math.ceil(_OVER_FETCH * limit * len(self._slot_of) / max(selected, 1))
            if count > _MAX_FETCHED:
                return None
        count = min(count, len(self._slot_of))
        expansion = max(self._expansion_search, count)
        if self._graph.expansion_search != expansion:
            self._graph.expansion_search = expansion  # type: ignore[misc]  # usearch's setter, unseen by mypy
        found = self._graph.search(query, count, threads=1).keys.astype(np.int64)
        if file_ids is None:
            return found
        kept = np.fromiter((self._file_of[slot] in file_ids for slot in found), dtype=bool, count=len(found))
        found = found[kept]
        return found if len(found) >= min(limit, selected) else None

    def _ranked(self, query: np.ndarray, slots: np.ndarray | None, limit: int) -> list[tuple[str, float]]:
        """The best ``limit`` of ``slots`` (None: every chunk held) by their exact cosine with ``query``."""
        import numpy as np

        assert self._vectors is not None and self._live is not None
        if slots is None:
            # One product over the rows in use, freed slots masked: cheaper than gathering the live rows first.
            top = len(self._chunk_ids)
            scores = np.where(self._live[:top], _dot(self._vectors[:top], query), -np.inf)
            slots = np.arange(top)
            count = min(limit, len(self._slot_of))
        else:
            scores = _dot(self._vectors[slots], query)
            count = min(limit, len(scores))
        if count <= 0:
            return []
        best = np.argpartition(-scores, count - 1)[:count]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [(str(self._chunk_ids[slots[i]]), float(scores[i])) for i in best]


def _fill(
    graph: Index, vectors: np.ndarray, slots: np.ndarray, done: Future[Index], cancelled: threading.Event
) -> None:
    """Insert these rows into a new graph, a step at a time (each step's rows copied out of the matrix), after
    any other build in the process; stop between steps once ``cancelled`` or the process exits."""
    import numpy as np

    def stopping() -> bool:
        return cancelled.is_set() or _EXITING.is_set()

    try:
        while not _ONE_BUILD.acquire(timeout=0.5):
            if stopping():
                raise BuildCancelled
        try:
            for start in range(0, len(slots), _BUILT_AT_ONCE):
                if stopping():
                    raise BuildCancelled
                step = slots[start : start + _BUILT_AT_ONCE]
                graph.add(step.astype(np.uint64), vectors[step], threads=0)
        finally:
            _ONE_BUILD.release()
    except BaseException as exc:  # noqa: BLE001  (handed to the index, which logs it)
        done.set_exception(exc)
    else:
        done.set_result(graph)


def _dot(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each row's dot product with ``query``: BLAS's kernel, on the calling thread (:mod:`ferryman.blas`).

    Not einsum, whose loop stays on the calling thread too but runs at about half BLAS's speed on one thread:
    100,000 rows of 384 took 18-20 ms against 10-13 ms (the search's exact path, up to ``ann_threshold``).
    """
    hold_to_callers()
    products: np.ndarray = rows @ query
    return products
