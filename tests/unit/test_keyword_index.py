"""The in-process BM25 index kept current from the chunk feed: writes apply at once, ranking is bm25s's."""

from __future__ import annotations

import random

import bm25s
import numpy as np
import pytest
from bm25s.stopwords import STOPWORDS_EN_PLUS

from ferryman.storage.search import keyword_index
from ferryman.storage.search.chunk_feed import ChunkChanges, ChunkEntry, ChunkRemoval
from ferryman.storage.search.keyword_index import KeywordIndex
from ferryman.storage.search.keyword_terms import STOP_WORDS, terms


def entry(chunk_id: str, file_id: str, version: int, text: str) -> ChunkEntry:
    return ChunkEntry(chunk_id, file_id, version, text, b"")


def changes(
    version: int,
    added: list[ChunkEntry] | None = None,
    removed: list[ChunkRemoval] | None = None,
    *,
    complete: bool = False,
) -> ChunkChanges:
    return ChunkChanges(version, complete, added or [], removed or [])


def ids(index: KeywordIndex, query: str, file_ids: list[str] | None = None, limit: int = 10) -> list[str]:
    return [chunk_id for chunk_id, _ in index.best(query, file_ids, limit)]


def harbour_index() -> KeywordIndex:
    index = KeywordIndex()
    index.apply(
        changes(
            1,
            [
                entry("c0", "file_a", 1, "The dogs ran to the harbour"),
                entry("c1", "file_a", 1, "A harbour ticket office"),
                entry("c2", "file_b", 1, "Running trails in winter"),
            ],
            complete=True,
        )
    )
    return index


def test_terms_are_lowercased_stemmed_words_without_stop_words() -> None:
    assert terms("Where do the DOGS run, and what about running?") == ["dog", "run", "run"]
    assert terms(" ?!* ") == []


def test_the_stop_words_are_bm25s_english_list() -> None:
    assert frozenset(STOPWORDS_EN_PLUS) == STOP_WORDS


def test_a_new_index_is_empty_below_every_version() -> None:
    index = KeywordIndex()
    assert index.version == -1
    assert index.best("harbour", None, 5) == []


def test_queries_rank_by_bm25_and_filter_files() -> None:
    index = harbour_index()
    assert index.version == 1
    assert ids(index, "harbour dog") == ["c0", "c1"]
    assert ids(index, "harbour dog", limit=1) == ["c0"]
    assert ids(index, "runs", ["file_b"]) == ["c2"]
    assert ids(index, "runs", ["file_a"]) == []
    assert ids(index, "harbour", ["file_a", "no_such_file"]) == ["c0", "c1"]
    assert ids(index, "harbour", []) == []
    assert ids(index, "harbour", limit=0) == []


def test_unknown_stop_word_only_and_empty_queries_find_nothing() -> None:
    index = harbour_index()
    assert index.best("unknown words", None, 5) == []
    assert index.best("the", None, 5) == []
    assert index.best("", None, 5) == []
    store_without_terms = KeywordIndex()
    store_without_terms.apply(changes(1, [entry("c0", "f", 1, "the and of")], complete=True))
    assert store_without_terms.best("harbour", None, 5) == []


def test_a_chunk_is_findable_right_after_it_is_added_and_gone_right_after_its_file_is_removed() -> None:
    index = harbour_index()
    index.apply(changes(2, [entry("c3", "file_c", 2, "Lighthouse keepers at the harbour")]))
    assert index.version == 2
    assert ids(index, "lighthouse") == ["c3"]
    index.apply(changes(3, removed=[ChunkRemoval(3, "file_a")]))
    assert ids(index, "harbour") == ["c3"]
    assert len(index) == 2
    index.apply(changes(4, removed=[ChunkRemoval(4, "file_c", "c3")]))
    assert ids(index, "harbour lighthouse") == []
    assert ids(index, "winter") == ["c2"]


def test_a_removal_spares_chunks_written_at_or_after_its_version() -> None:
    index = harbour_index()
    index.apply(changes(5, [entry("c1", "file_a", 5, "A harbour ticket office, rebuilt")]))
    index.apply(
        changes(6, removed=[ChunkRemoval(4, "file_a"), ChunkRemoval(5, "file_a"), ChunkRemoval(5, "file_a", "c1")])
    )
    assert ids(index, "harbour") == ["c1"]
    index.apply(changes(7, removed=[ChunkRemoval(6, "file_a")]))
    assert ids(index, "harbour") == []


def test_removals_apply_before_the_additions_of_the_same_changes() -> None:
    index = harbour_index()
    index.apply(changes(2, [entry("c0", "file_a", 2, "Dogs sleep at the harbour")], [ChunkRemoval(2, "file_a")]))
    assert ids(index, "harbour") == ["c0"]
    assert ids(index, "sleep") == ["c0"]


def test_an_added_chunk_replaces_the_chunk_of_the_same_id() -> None:
    index = harbour_index()
    index.apply(
        changes(2, [entry("c0", "file_a", 2, "Snowy peaks"), entry("c0", "file_b", 2, "Snowy peaks and winter")])
    )
    assert len(index) == 3
    assert ids(index, "dog") == []
    assert ids(index, "snowy winter") == ["c0", "c2"]
    index.apply(changes(3, removed=[ChunkRemoval(3, "file_a")]))
    assert ids(index, "snowy") == ["c0"]


def test_a_complete_answer_starts_the_index_again() -> None:
    index = harbour_index()
    index.apply(changes(9, [entry("c9", "file_z", 9, "Harbour seals")], complete=True))
    assert index.version == 9
    assert len(index) == 1
    assert ids(index, "harbour dog winter") == ["c9"]
    assert ids(index, "seal", ["file_a"]) == []


def test_equal_scores_come_out_in_the_order_chunks_were_written() -> None:
    index = KeywordIndex()
    index.apply(changes(1, [entry(f"c{i}", "f", 1, "harbour lights") for i in range(300)], complete=True))
    index.apply(changes(2, [entry("c0", "f", 2, "harbour lights")]))
    assert ids(index, "harbour", limit=4) == ["c1", "c2", "c3", "c4"]
    assert ids(index, "harbour", limit=300)[-2:] == ["c299", "c0"]


def test_scores_and_order_match_bm25s() -> None:
    rng = random.Random(5)
    words = ["harbour", "dog", "ticket", "winter", "trail", "river", "bridge", "lamp", "seal", "boat", "rope", "tide"]
    texts = [" ".join(rng.choices(words, k=rng.randint(3, 30))) for _ in range(60)]
    index = KeywordIndex()
    index.apply(changes(1, [entry(f"c{i}", "f", 1, text) for i, text in enumerate(texts)], complete=True))
    reference = bm25s.BM25(k1=1.2, b=0.75)
    reference.index([terms(text) for text in texts], show_progress=False)
    for query in ["harbour dog", "winter trails and tides", "boat boat rope", "lamp", "seal bridge river ticket"]:
        expected = reference.get_scores(terms(query))
        order = np.argsort(-expected, kind="stable")[:10]
        found = index.best(query, None, 10)
        assert [chunk_id for chunk_id, _ in found] == [f"c{i}" for i in order]
        assert [score for _, score in found] == pytest.approx([float(expected[i]) for i in order], rel=1e-5)


@pytest.mark.parametrize("compact_min", [1, 1024])
def test_random_writes_with_and_without_compaction_match_a_fresh_index(
    monkeypatch: pytest.MonkeyPatch, compact_min: int
) -> None:
    monkeypatch.setattr(keyword_index, "_COMPACT_MIN", compact_min)
    rng = random.Random(compact_min)
    words = [f"w{n}" for n in range(40)]
    live: dict[str, ChunkEntry] = {}
    index = KeywordIndex()
    for version in range(1, 60):
        removed = [ChunkRemoval(version, f"f{rng.randrange(8)}") for _ in range(rng.randrange(3))]
        removed += [
            ChunkRemoval(version, live[cid].file_id, cid) for cid in rng.sample(sorted(live), min(2, len(live)))
        ]
        for removal in removed:
            live = {
                cid: e for cid, e in live.items() if e.file_id != removal.file_id or removal.chunk_id not in (None, cid)
            }
        added = [
            entry(f"c{rng.randrange(120)}", f"f{rng.randrange(8)}", version, " ".join(rng.choices(words, k=8)))
            for _ in range(rng.randrange(12))
        ]
        for chunk in added:
            live.pop(chunk.chunk_id, None)
            live[chunk.chunk_id] = chunk
        index.apply(changes(version, added, removed))
        fresh = KeywordIndex()
        fresh.apply(changes(version, list(live.values()), complete=True))
        assert len(index) == len(live)
        for query in ["w0 w1", "w5 w17 w33", "w39"]:
            assert index.best(query, None, 8) == fresh.best(query, None, 8)
            assert index.best(query, ["f1", "f2"], 8) == fresh.best(query, ["f1", "f2"], 8)


@pytest.mark.parametrize(("batch", "pending", "key32_limit"), [(3, 5, 2**31), (7, 1, 0), (4096, 1 << 20, 0)])
def test_a_build_in_small_batches_flushed_often_or_with_wide_keys_is_the_same_index(
    monkeypatch: pytest.MonkeyPatch, batch: int, pending: int, key32_limit: int
) -> None:
    rng = random.Random(batch)
    words = ["harbour", "Dogs", "tickets", "winter", "trail", "café", "naïve", "the", "lamp", "seal", "tide", "x_1"]
    added = [
        entry(f"c{rng.randrange(150)}", f"f{rng.randrange(9)}", 1, " ".join(rng.choices(words, k=rng.randint(0, 25))))
        for _ in range(200)
    ]
    reference = KeywordIndex()
    reference.apply(changes(1, added, complete=True))
    monkeypatch.setattr(keyword_index, "_BATCH", batch)
    monkeypatch.setattr(keyword_index, "_PENDING", pending)
    monkeypatch.setattr(keyword_index, "_KEY32_LIMIT", key32_limit)
    index = KeywordIndex()
    index.apply(changes(1, added[:120], complete=True))
    index.apply(changes(2, added[120:]))
    assert len(index) == len(reference) == len({chunk.chunk_id for chunk in added})
    for query in ["harbour dog", "cafe café naive", "winter tides x_1", "lamp", "seal trail ticket"]:
        for file_ids in (None, ["f1", "f4"]):
            assert index.best(query, file_ids, 20) == reference.best(query, file_ids, 20)
