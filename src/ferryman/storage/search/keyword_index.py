"""Keyword search in process: a BM25 inverted index of one store's chunks, kept current from the chunk feed.

Every backend searches keywords here (see :mod:`.synced_indexes`): the index
is built once from a complete feed answer, then each write costs only the
chunks it names. A chunk's terms are those of :mod:`.keyword_terms`.

Layout: each chunk gets a *slot* (a row number); each term holds two growable
arrays, the slots of the chunks it occurs in and its frequency there. A query
is one vectorised pass per query term over those arrays, scored with BM25
(k1 = 1.2, b = 0.75, Lucene's idf, as ``bm25s`` scores), and a partial sort.

Writes: an added chunk is appended to a new slot and to its terms' arrays
(O(its words)); a removed or replaced chunk is only marked dead (O(1)), and
searches skip dead slots. Document frequencies are counted at query time over
live slots, and the live count and total length are kept as running sums, so
no write touches other chunks. Once dead slots outnumber live ones (and there
are at least :data:`_COMPACT_MIN` of them), the index is compacted: dead slots
are dropped from every array and the rest renumbered in order, O(postings +
chunks + terms). Since at least as many chunks were removed since the last
compaction as the index holds, its cost is at most about twice the removed
chunks' own words: O(1) amortised per removed word.

Cost at 100,000 chunks of 40-120 words (5,000-word Zipf vocabulary): about
60 MB of RSS (30 MB of it postings); about 2 ms of CPU per 3-6 word query,
also right after a write (the first search after one recomputes the per-slot
length norms, O(chunks), well under a millisecond), so
:meth:`KeywordIndex.best` can run on the event loop; 500 added chunks take
about 0.1 s to apply, a removed file well under 1 ms, and a compaction with
half the slots dead about 0.2 s. Building the whole index from a complete
answer (a replica's first search of the store) takes about 2 s of CPU, most of
it per word in Python: splitting the texts into words, then one dictionary
lookup per word for its term id (each distinct word is stemmed once per build).
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from ferryman.storage.search.chunk_feed import ChunkChanges, ChunkEntry, ChunkRemoval
from ferryman.storage.search.keyword_terms import TermIds, terms, words

K1 = 1.2
B = 0.75
_COMPACT_MIN = 1024
"""Fewer dead slots than this are never worth a compaction."""
_BATCH = 1024
"""Chunks tokenised and counted at once (bounds the memory an apply needs on top of the index)."""
_MAX_FREQUENCY = 0xFFFF
"""Term frequencies are stored in 16 bits (BM25 has long saturated there)."""
_KEY32_LIMIT = 2**31
"""A batch's (term, chunk) keys are 32-bit below this: numpy sorts them about twice as fast as 64-bit ones."""
_PENDING = 1 << 20
"""Postings of added chunks gathered before they are appended to their terms (about 10 MB): each term's arrays are
then extended once per many batches, not once per batch."""

Ints = npt.NDArray[np.int32]
Floats = npt.NDArray[np.float32]


class _Column:
    """A growable numpy column of per-slot values."""

    def __init__(self, dtype: type[np.generic]) -> None:
        self.values: npt.NDArray[Any] = np.zeros(64, dtype=dtype)
        self.size = 0

    def extend(self, added: npt.NDArray[Any]) -> None:
        end = self.size + len(added)
        if end > len(self.values):
            grown = np.zeros(max(end, 2 * len(self.values)), dtype=self.values.dtype)
            grown[: self.size] = self.values[: self.size]
            self.values = grown
        self.values[self.size : end] = added
        self.size = end

    def view(self) -> npt.NDArray[Any]:
        return self.values[: self.size]

    def keep(self, slots: Ints) -> None:
        kept = self.values[slots]
        self.values = np.zeros(max(64, 2 * len(kept)), dtype=self.values.dtype)
        self.values[: len(kept)] = kept
        self.size = len(kept)


def _counted(
    term_ids: npt.NDArray[np.int64], chunk_words: list[int], term_count: int
) -> tuple[Ints, Ints, npt.NDArray[np.int64], Ints]:
    """A batch's postings: per (term, chunk), sorted by term then chunk, the term, the chunk's row in the batch and
    the term's frequency there; and each chunk's length in terms.

    Args:
        term_ids: The term id of each word of the batch's chunks, in order (negative: not indexed).
        chunk_words: How many of those words each chunk has.
        term_count: Above every term id.
    """
    count = len(chunk_words)
    key: type[np.signedinteger[Any]] = np.int32 if term_count * count < _KEY32_LIMIT else np.int64
    rows: npt.NDArray[np.signedinteger[Any]] = np.repeat(np.arange(count, dtype=key), chunk_words)
    kept = term_ids >= 0
    terms, rows = term_ids[kept].astype(key), rows[kept]
    pairs: npt.NDArray[np.signedinteger[Any]]
    pairs, frequencies = np.unique(terms * count + rows, return_counts=True)
    lengths = np.bincount(rows, minlength=count).astype(np.int32)
    return (pairs // count).astype(np.int32), (pairs % count).astype(np.int32), frequencies, lengths


class _NewPostings:
    """``(term id, slot, frequency)`` of chunks being added, gathered batch by batch, sorted by term on the way out."""

    def __init__(self) -> None:
        self._parts: list[tuple[Ints, Ints, npt.NDArray[np.uint16]]] = []
        self.size = 0

    def add(self, term_ids: Ints, slots: Ints, frequencies: npt.NDArray[np.int64]) -> None:
        """Postings of one batch, sorted by term then slot, at slots above those of every batch added before."""
        self._parts.append((term_ids, slots, np.minimum(frequencies, _MAX_FREQUENCY).astype(np.uint16)))
        self.size += len(term_ids)

    def take(self) -> tuple[Ints, Ints, npt.NDArray[np.uint16]]:
        """Every posting gathered, sorted by term then slot (the batches are sorted runs: a stable sort keeps the slot
        order within a term); none is held after."""
        term_ids, slots, frequencies = (np.concatenate(column) for column in zip(*self._parts, strict=True))
        self._parts, self.size = [], 0
        order = np.argsort(term_ids, kind="stable")
        return term_ids[order], slots[order], frequencies[order]


class KeywordIndex:
    """The BM25 index of one store's chunks (a :class:`~.synced_indexes.SyncedIndex`)."""

    def __init__(self) -> None:
        self.version = -1
        self._clear()

    def _clear(self) -> None:
        self._term_ids: dict[str, int] = {}
        self._postings: list[array[int]] = []
        """Per term id: the slots it occurs in, ascending."""
        self._frequencies: list[array[int]] = []
        """Per term id: how often it occurs there."""
        self._chunk_ids: list[str] = []
        self._slot_of: dict[str, int] = {}
        """Live chunks only."""
        self._lengths = _Column(np.int32)
        self._versions = _Column(np.int64)
        self._files = _Column(np.int32)
        self._alive = _Column(np.bool_)
        self._file_codes: dict[str, int] = {}
        self._file_slots: list[array[int]] = []
        """Per file code: its slots, dead ones included until a compaction."""
        self._live = 0
        self._live_length = 0
        self._dead = 0
        self._norms: Floats | None = None

    def __len__(self) -> int:
        return self._live

    def apply(self, changes: ChunkChanges) -> None:
        """Bring the index to ``changes.version``: removals first, then added chunks (see :mod:`.chunk_feed`)."""
        if changes.complete:
            self._clear()
        for removal in changes.removed:
            self._remove(removal)
        self._add(changes.added)
        self._norms = None
        if self._dead >= max(self._live, _COMPACT_MIN):
            self._compact()
        self.version = changes.version

    def best(self, query: str, file_ids: list[str] | None, limit: int) -> list[tuple[str, float]]:
        """``(chunk_id, BM25 score)`` of the ``limit`` best chunks for ``query`` with a positive score, best first.

        Args:
            query: The text searched; its terms are weighted by how often they occur in it.
            file_ids: Only chunks of these files (None: every file).
            limit: How many at most.
        """
        counts = Counter(term for term in terms(query) if term in self._term_ids)
        if not counts or limit <= 0 or self._live == 0:
            return []
        scores = self._scores(counts)
        if file_ids is not None:
            wanted = np.zeros(len(self._file_slots), dtype=np.bool_)
            wanted[[self._file_codes[file_id] for file_id in file_ids if file_id in self._file_codes]] = True
            scores[~wanted[self._files.view()]] = 0
        # Every slot scoring at least the limit-th best score, so that ties go to the earlier slot, not to chance.
        found = np.flatnonzero(scores > 0)
        if len(found) > limit:
            candidates = scores[found]
            found = found[candidates >= np.partition(candidates, len(found) - limit)[len(found) - limit]]
        found = found[np.lexsort((found, -scores[found]))][:limit]
        return [(self._chunk_ids[slot], float(scores[slot])) for slot in found.tolist()]

    def _scores(self, counts: Counter[str]) -> Floats:
        """Every slot's BM25 score (float32, as ``bm25s`` scores): one vectorised pass per query term."""
        norms = self._length_norms()
        scores = np.zeros(len(norms), dtype=np.float32)
        for term, times in counts.items():
            term_id = self._term_ids[term]
            # Native-width indices and take/add.at: fancy indexing with int32 is twice as slow here.
            slots = np.array(self._postings[term_id], dtype=np.intp)
            frequencies = np.array(self._frequencies[term_id], dtype=np.float32)
            part = np.take(norms, slots)
            holding = len(slots) - (np.count_nonzero(part == np.inf) if self._dead else 0)
            if holding == 0:
                continue
            weight = times * math.log(1 + (self._live - holding + 0.5) / (holding + 0.5))
            part += frequencies
            np.divide(frequencies, part, out=part)
            part *= np.float32(weight)
            np.add.at(scores, slots, part)
        return scores

    def _length_norms(self) -> Floats:
        """Per slot, BM25's ``k1 · (1 − b + b · length / average length)``; recomputed after a write."""
        if self._norms is None:
            average = self._live_length / self._live
            lengths = self._lengths.view().astype(np.float32)
            scale = np.float32(B / average if average > 0 else 0.0)
            self._norms = np.float32(K1) * (np.float32(1 - B) + lengths * scale)
            # A dead slot's infinite norm scores it 0 and marks it for the document frequencies.
            self._norms[~self._alive.view()] = np.inf
        return self._norms

    def _remove(self, removal: ChunkRemoval) -> None:
        if removal.chunk_id is not None:
            slot = self._slot_of.get(removal.chunk_id)
            if slot is not None and int(self._versions.values[slot]) < removal.version:
                self._kill(slot)
            return
        code = self._file_codes.get(removal.file_id)
        if code is None:
            return
        slots = np.array(self._file_slots[code], dtype=np.int32)
        doomed = slots[self._alive.view()[slots] & (self._versions.view()[slots] < removal.version)]
        for slot in doomed.tolist():
            self._kill(slot)

    def _kill(self, slot: int) -> None:
        self._alive.values[slot] = False
        del self._slot_of[self._chunk_ids[slot]]
        self._live -= 1
        self._live_length -= int(self._lengths.values[slot])
        self._dead += 1

    def _add(self, entries: list[ChunkEntry]) -> None:
        latest = self._latest(entries)
        if self._slot_of:
            for entry in latest:
                old = self._slot_of.get(entry.chunk_id)
                if old is not None:
                    self._kill(old)
        term_ids, pending = TermIds(self._term_id), _NewPostings()
        for start in range(0, len(latest), _BATCH):
            self._add_batch(latest[start : start + _BATCH], term_ids, pending)
            if pending.size >= _PENDING:
                self._append_postings(*pending.take())
        if pending.size:
            self._append_postings(*pending.take())

    @staticmethod
    def _latest(entries: list[ChunkEntry]) -> list[ChunkEntry]:
        """The entries less those of an id repeated later: a chunk id's last entry wins, in its place."""
        if len({entry.chunk_id for entry in entries}) == len(entries):
            return entries
        last: dict[str, ChunkEntry] = {}
        for entry in entries:
            last.pop(entry.chunk_id, None)
            last[entry.chunk_id] = entry
        return list(last.values())

    def _add_batch(self, entries: list[ChunkEntry], term_ids: TermIds, pending: _NewPostings) -> None:
        """Index new chunks: the Python work is per word and per distinct word, the counting is numpy's."""
        first = self._lengths.size
        found = [words(entry.text) for entry in entries]
        ids = term_ids.of(list(chain.from_iterable(found)))
        terms_of, rows, frequencies, lengths = _counted(ids, list(map(len, found)), len(self._postings))
        pending.add(terms_of, rows + first, frequencies)
        self._add_slots(entries, first)
        self._lengths.extend(lengths)
        self._live += len(entries)
        self._live_length += int(lengths.sum())

    def _add_slots(self, entries: list[ChunkEntry], first: int) -> None:
        """Give the chunks the slots from ``first`` on, in order."""
        chunk_ids = list(map(attrgetter("chunk_id"), entries))
        slots = range(first, first + len(entries))
        self._chunk_ids.extend(chunk_ids)
        self._slot_of.update(zip(chunk_ids, slots, strict=True))
        codes = list(map(self._file_code, map(attrgetter("file_id"), entries)))
        for slot, code in zip(slots, codes, strict=True):
            self._file_slots[code].append(slot)
        self._versions.extend(np.fromiter(map(attrgetter("version"), entries), np.int64, len(entries)))
        self._files.extend(np.array(codes, dtype=np.int32))
        self._alive.extend(np.ones(len(entries), dtype=np.bool_))

    def _append_postings(self, term_ids: Ints, slots: Ints, counts: npt.NDArray[np.uint16]) -> None:
        """Append ``(slot, frequency)`` pairs sorted by term to their terms' arrays, one run per term."""
        if len(term_ids) == 0:
            return
        bounds = np.flatnonzero(np.diff(term_ids)) + 1
        starts, ends = np.concatenate(([0], bounds)), np.concatenate((bounds, [len(term_ids)]))
        # Byte slices of memoryviews: no numpy array or bytes object is made per term.
        slot_bytes, count_bytes = slots.data.cast("B"), counts.data.cast("B")
        postings, frequencies_of = self._postings, self._frequencies
        for term_id, start, end in zip(term_ids[starts].tolist(), starts.tolist(), ends.tolist(), strict=True):
            postings[term_id].frombytes(slot_bytes[4 * start : 4 * end])
            frequencies_of[term_id].frombytes(count_bytes[2 * start : 2 * end])

    def _term_id(self, term: str) -> int:
        term_id = self._term_ids.get(term)
        if term_id is None:
            term_id = self._term_ids[term] = len(self._postings)
            self._postings.append(array("i"))
            self._frequencies.append(array("H"))
        return term_id

    def _file_code(self, file_id: str) -> int:
        code = self._file_codes.get(file_id)
        if code is None:
            code = self._file_codes[file_id] = len(self._file_slots)
            self._file_slots.append(array("i"))
        return code

    def _compact(self) -> None:
        """Drop dead slots everywhere and renumber the live ones in order (see the module's note on cost)."""
        alive = self._alive.view()
        kept: Ints = np.flatnonzero(alive).astype(np.int32)
        renumbered = np.full(len(alive), -1, dtype=np.int32)
        renumbered[kept] = np.arange(len(kept), dtype=np.int32)
        term_ids: dict[str, int] = {}
        postings: list[array[int]] = []
        frequencies: list[array[int]] = []
        for term, term_id in self._term_ids.items():
            slots = np.array(self._postings[term_id], dtype=np.int32)
            live = alive[slots]
            if live.any():
                term_ids[term] = len(postings)
                postings.append(array("i", renumbered[slots[live]].tobytes()))
                frequencies.append(array("H", np.array(self._frequencies[term_id], dtype=np.uint16)[live].tobytes()))
        self._term_ids, self._postings, self._frequencies = term_ids, postings, frequencies
        self._chunk_ids = [self._chunk_ids[slot] for slot in kept.tolist()]
        self._slot_of = {chunk_id: slot for slot, chunk_id in enumerate(self._chunk_ids)}
        self._compact_files(renumbered, kept)
        for column in (self._lengths, self._versions, self._alive):
            column.keep(kept)
        self._dead = 0
        self._norms = None

    def _compact_files(self, renumbered: Ints, kept: Ints) -> None:
        codes: dict[str, int] = {}
        file_slots: list[array[int]] = []
        recoded = np.full(len(self._file_slots), -1, dtype=np.int32)
        for file_id, code in self._file_codes.items():
            slots = renumbered[np.array(self._file_slots[code], dtype=np.int32)]
            slots = slots[slots >= 0]
            if len(slots):
                recoded[code] = codes[file_id] = len(file_slots)
                file_slots.append(array("i", slots.tobytes()))
        self._file_codes, self._file_slots = codes, file_slots
        self._files.keep(kept)
        self._files.values[: self._files.size] = recoded[self._files.view()]
