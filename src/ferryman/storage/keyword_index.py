"""Keyword search in process: a BM25 inverted index of one store's chunks, kept current from the chunk feed.

Every backend searches keywords here (see :mod:`.synced_indexes`): the index
is built once from a complete feed answer, then each write costs only the
chunks it names. Words are lowercased, English stop words dropped (NLTK's
list, which holds a question's own words: "what", "how", "does") and the rest
stemmed with the Snowball English stemmer, as PostgreSQL's ``english`` text
search does, so a natural-language question matches a chunk's inflections
("dogs" finds "dog").

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
half the slots dead about 0.2 s.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from collections.abc import Iterable
from itertools import chain, repeat
from typing import Any

import numpy as np
import numpy.typing as npt
import Stemmer

from .chunk_feed import ChunkChanges, ChunkEntry, ChunkRemoval

K1 = 1.2
B = 0.75
_COMPACT_MIN = 1024
"""Fewer dead slots than this are never worth a compaction."""
_BATCH = 1024
"""Chunks tokenised and counted at once (bounds the memory an apply needs on top of the index)."""
_MAX_FREQUENCY = 0xFFFF
"""Term frequencies are stored in 16 bits (BM25 has long saturated there)."""

_WORD = re.compile(r"\w+")
_STOP_WORDS = frozenset(
    """
a about above after again against ain all am an and any are aren aren't as at be because been before being below
between both but by can couldn couldn't d did didn didn't do does doesn doesn't doing don don't down during each
few for from further had hadn hadn't has hasn hasn't have haven haven't having he her here hers herself him
himself his how i if in into is isn isn't it it's its itself just ll m ma me mightn mightn't more most mustn
mustn't my myself needn needn't no nor not now o of off on once only or other our ours ourselves out over own re
s same shan shan't she she's should should've shouldn shouldn't so some such t than that that'll the their
theirs them themselves then there these they this those through to too under until up ve very was wasn wasn't we
were weren weren't what when where which while who whom why will with won won't wouldn wouldn't y you you'd
you'll you're you've your yours yourself yourselves
""".split()
)
"""NLTK's English stop words, as ``bm25s`` lists them (held here: importing ``bm25s`` costs 13 MB of RSS)."""
_STEMMER = Stemmer.Stemmer("english")

Ints = npt.NDArray[np.int32]
Floats = npt.NDArray[np.float32]


def terms(text: str) -> list[str]:
    """The search terms of a text: its lowercased words less stop words, stemmed."""
    return list(_STEMMER.stemWords([word for word in _WORD.findall(text.lower()) if word not in _STOP_WORDS]))


class _Column:
    """A growable numpy column of per-slot values."""

    def __init__(self, dtype: type[np.generic]) -> None:
        self.values: npt.NDArray[Any] = np.zeros(64, dtype=dtype)
        self.size = 0

    def extend(self, values: Iterable[int]) -> None:
        added = np.fromiter(values, dtype=self.values.dtype)
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
        # A chunk id twice in one batch: its last entry wins, in its place.
        last: dict[str, ChunkEntry] = {}
        for entry in entries:
            last.pop(entry.chunk_id, None)
            last[entry.chunk_id] = entry
            old = self._slot_of.get(entry.chunk_id)
            if old is not None:
                self._kill(old)
        latest = list(last.values())
        for start in range(0, len(latest), _BATCH):
            self._add_batch(latest[start : start + _BATCH])

    def _add_batch(self, entries: list[ChunkEntry]) -> None:
        """Index new chunks: the Python work is per word and per distinct term, the counting is numpy's."""
        first, count = self._lengths.size, len(entries)
        words = [_WORD.findall(entry.text.lower()) for entry in entries]
        flat = list(chain.from_iterable(words))
        distinct = [word for word in set(flat) if word not in _STOP_WORDS]
        term_of = dict(zip(distinct, map(self._term_id, _STEMMER.stemWords(distinct)), strict=True))
        term_ids = np.fromiter(map(term_of.get, flat, repeat(-1)), dtype=np.int64, count=len(flat))
        docs = np.repeat(np.arange(count, dtype=np.int64), [len(chunk_words) for chunk_words in words])
        kept = term_ids >= 0
        term_ids, docs = term_ids[kept], docs[kept]
        lengths = np.bincount(docs, minlength=count)
        # Sorted by term then chunk: each term's new postings are one run, in slot order.
        pairs, frequencies = np.unique(term_ids * count + docs, return_counts=True)
        self._append_postings(pairs // count, (pairs % count + first).astype(np.int32), frequencies)
        for slot, entry in enumerate(entries, start=first):
            self._chunk_ids.append(entry.chunk_id)
            self._slot_of[entry.chunk_id] = slot
            self._file_slots_of(entry.file_id).append(slot)
        self._lengths.extend(lengths.tolist())
        self._versions.extend(entry.version for entry in entries)
        self._files.extend(self._file_codes[entry.file_id] for entry in entries)
        self._alive.extend(1 for _ in entries)
        self._live += count
        self._live_length += int(lengths.sum())

    def _append_postings(
        self, term_ids: npt.NDArray[np.int64], slots: Ints, frequencies: npt.NDArray[np.int64]
    ) -> None:
        """Append ``(slot, frequency)`` pairs sorted by term to their terms' arrays, one run per term."""
        if len(term_ids) == 0:
            return
        counts = np.minimum(frequencies, _MAX_FREQUENCY).astype(np.uint16)
        bounds = np.flatnonzero(np.diff(term_ids)) + 1
        starts, ends = np.concatenate(([0], bounds)), np.concatenate((bounds, [len(term_ids)]))
        for term_id, start, end in zip(term_ids[starts].tolist(), starts.tolist(), ends.tolist(), strict=True):
            self._postings[term_id].frombytes(slots[start:end].tobytes())
            self._frequencies[term_id].frombytes(counts[start:end].tobytes())

    def _term_id(self, term: str) -> int:
        term_id = self._term_ids.get(term)
        if term_id is None:
            term_id = self._term_ids[term] = len(self._postings)
            self._postings.append(array("i"))
            self._frequencies.append(array("H"))
        return term_id

    def _file_slots_of(self, file_id: str) -> array[int]:
        code = self._file_codes.get(file_id)
        if code is None:
            code = self._file_codes[file_id] = len(self._file_slots)
            self._file_slots.append(array("i"))
        return self._file_slots[code]

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
