"""The in-process vector index kept current from the chunk feed: exact when small, HNSW (usearch) when large."""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest

from ferryman.storage.search import vector_index
from ferryman.storage.search.chunk_feed import ChunkChanges, ChunkEntry, ChunkRemoval
from ferryman.storage.search.vector_index import VectorIndex

DIM = 32


def unit(vector: np.ndarray) -> np.ndarray:
    return (vector / np.linalg.norm(vector, axis=-1, keepdims=True)).astype(np.float32)


def clustered(count: int, centroids: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    """Unit vectors drawn around random centroids, as real embeddings cluster."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((centroids, dim)))
    noise = rng.standard_normal((count, dim)) / np.sqrt(dim)
    return unit(centres[rng.integers(0, centroids, count)] + noise)


def entry(chunk_id: str, file_id: str, version: int, vector: np.ndarray) -> ChunkEntry:
    return ChunkEntry(chunk_id, file_id, version, "", np.asarray(vector, dtype="<f4").tobytes())


def changes(
    version: int,
    added: list[ChunkEntry] | None = None,
    removed: list[ChunkRemoval] | None = None,
    *,
    complete: bool = False,
) -> ChunkChanges:
    return ChunkChanges(version, complete, added or [], removed or [])


def ids(index: VectorIndex, query: np.ndarray, file_ids: list[str] | None = None, limit: int = 10) -> list[str]:
    return [chunk_id for chunk_id, _ in index.nearest(query.tolist(), file_ids, limit)]


def filled(vectors: np.ndarray, per_file: int = 10, batch: int = 500, **settings: int) -> VectorIndex:
    """An index of ``vectors`` (chunk ``c{i}`` of file ``f{i // per_file}``), written in batches as a store is."""
    index = VectorIndex(**settings)
    for version, start in enumerate(range(0, len(vectors), batch), start=1):
        rows = range(start, min(start + batch, len(vectors)))
        index.apply(changes(version, [entry(f"c{i}", f"f{i // per_file}", version, vectors[i]) for i in rows]))
    return index


def exact(vectors: np.ndarray, query: np.ndarray, limit: int, rows: np.ndarray | None = None) -> list[str]:
    rows = np.arange(len(vectors)) if rows is None else rows
    scores = vectors[rows] @ query
    return [f"c{rows[i]}" for i in np.argsort(-scores, kind="stable")[:limit]]


# Both paths: exact below the threshold; the graph from the first chunk (a threshold of 1).
MODES = [pytest.param({}, id="exact"), pytest.param({"ann_threshold": 1, "exact_file_limit": 0}, id="hnsw")]


def test_a_new_index_is_empty_below_every_version() -> None:
    index = VectorIndex()
    assert index.version == -1
    assert index.nearest([1.0, 0.0], None, 5) == []
    assert not index.approximate


@pytest.mark.parametrize("settings", MODES)
def test_a_chunk_is_findable_right_after_it_is_added_and_gone_right_after_it_is_removed(
    settings: dict[str, int],
) -> None:
    vectors = clustered(60, 6)
    index = filled(vectors, batch=20, **settings)
    assert index.approximate == bool(settings)
    fresh = clustered(1, 1, seed=7)[0]
    index.apply(changes(10, [entry("new", "f_new", 10, fresh)]))
    assert index.version == 10
    assert ids(index, fresh, limit=1) == ["new"]

    index.apply(changes(11, removed=[ChunkRemoval(11, "f_new")]))
    assert "new" not in ids(index, fresh, limit=60)
    index.apply(changes(12, removed=[ChunkRemoval(12, "f0", chunk_id="c3")]))
    assert ids(index, vectors[3], limit=1) != ["c3"]
    assert "c3" not in ids(index, vectors[3], limit=60)
    assert len(index) == 59
    assert ids(index, vectors[4], limit=1) == ["c4"]


@pytest.mark.parametrize("settings", MODES)
def test_a_removal_drops_only_chunks_written_before_it(settings: dict[str, int]) -> None:
    vectors = clustered(3, 3)
    index = VectorIndex(**settings)
    index.apply(changes(3, [entry("c0", "f", 3, vectors[0]), entry("c1", "f", 1, vectors[1])]))
    # A removal of file f at version 2 reaches the index after c0 was written again at version 3.
    index.apply(changes(4, removed=[ChunkRemoval(2, "f"), ChunkRemoval(2, "f", chunk_id="c0")]))
    assert ids(index, vectors[0]) == ["c0"]

    index.apply(changes(5, removed=[ChunkRemoval(5, "f")]))
    assert index.nearest(vectors[0].tolist(), None, 10) == []


@pytest.mark.parametrize("settings", MODES)
def test_a_chunk_added_again_replaces_the_one_of_the_same_id(settings: dict[str, int]) -> None:
    vectors = clustered(40, 4)
    index = filled(vectors, **settings)
    moved = clustered(1, 1, seed=9)[0]
    index.apply(
        changes(2, [entry("c5", "f_other", 2, moved), entry("c6", "f0", 2, vectors[7]), entry("c6", "f0", 2, moved)])
    )
    assert len(index) == 40
    assert set(ids(index, moved, limit=2)) == {"c5", "c6"}  # the later c6 of the batch won
    assert ids(index, moved, ["f_other"]) == ["c5"]
    assert "c5" not in ids(index, vectors[5], ["f0"], limit=40)
    assert ids(index, vectors[5], limit=1) != ["c5"]


@pytest.mark.parametrize("settings", MODES)
def test_a_complete_answer_starts_the_index_again(settings: dict[str, int]) -> None:
    index = filled(clustered(30, 3), **settings)
    other = clustered(5, 2, dim=8, seed=3)
    index.apply(changes(7, [entry(f"d{i}", "g", 7, other[i]) for i in range(5)], complete=True))
    assert index.version == 7 and len(index) == 5
    # The dimension is the new first vector's: 8, no longer 32.
    assert ids(index, other[2], limit=1) == ["d2"]
    assert index.nearest(clustered(1, 1)[0].tolist(), None, 10) == []


@pytest.mark.parametrize("settings", MODES)
def test_a_query_or_chunk_of_another_dimension_finds_nothing_and_is_not_held(settings: dict[str, int]) -> None:
    vectors = clustered(20, 2)
    index = filled(vectors, **settings)
    assert index.nearest([0.5] * (DIM + 1), None, 10) == []
    assert index.nearest([0.5] * (DIM - 1), ["f0"], 10) == []
    index.apply(changes(2, [entry("wide", "f9", 2, np.ones(DIM * 2)), ChunkEntry("bare", "f9", 2, "", b"")]))
    assert len(index) == 20
    assert index.nearest(vectors[0].tolist(), ["f9"], 10) == []


@pytest.mark.parametrize("settings", MODES)
def test_nothing_is_found_for_no_files_or_no_limit(settings: dict[str, int]) -> None:
    vectors = clustered(20, 2)
    index = filled(vectors, **settings)
    assert index.nearest(vectors[0].tolist(), [], 10) == []
    assert index.nearest(vectors[0].tolist(), None, 0) == []
    assert index.nearest(vectors[0].tolist(), ["no_such_file"], 10) == []


@pytest.mark.parametrize("exact_file_limit", [0, 10_000], ids=["over-fetched", "selection-exact"])
def test_a_file_filter_finds_the_best_chunks_of_those_files(exact_file_limit: int) -> None:
    vectors = clustered(1500, 30, seed=1)
    index = filled(vectors, per_file=10, ann_threshold=500, exact_file_limit=exact_file_limit)
    assert index.approximate
    files = np.arange(len(vectors)) // 10
    queries = clustered(20, 30, seed=2)
    for chosen in (["f3"], [f"f{i}" for i in range(0, 150, 2)]):
        rows = np.flatnonzero(np.isin(files, [int(name[1:]) for name in chosen]))
        for query in queries:
            got = ids(index, query, chosen, limit=5)
            assert {int(chunk_id[1:]) // 10 for chunk_id in got} <= {int(name[1:]) for name in chosen}
            truth = exact(vectors, query, 5, rows)
            assert len(got) == 5 and len(set(got) & set(truth)) >= 4


def test_recall_at_10_against_exact_search_is_at_least_095_past_the_threshold() -> None:
    vectors = clustered(4000, 200, dim=64, seed=4)
    index = filled(vectors, ann_threshold=1000)
    assert index.approximate
    queries = clustered(100, 200, dim=64, seed=5)
    found = sum(len(set(ids(index, query)) & set(exact(vectors, query, 10))) for query in queries)
    assert found / (10 * len(queries)) >= 0.95


@pytest.mark.parametrize("settings", MODES)
def test_scores_are_the_exact_cosine_best_first(settings: dict[str, int]) -> None:
    vectors = clustered(200, 10, seed=6)
    index = filled(vectors, **settings)
    query = clustered(1, 10, seed=8)[0] * 3  # not unit length: the score is still the cosine
    found = index.nearest(query.tolist(), None, 10)
    assert len(found) == 10
    cosines = [
        float(vectors[int(chunk_id[1:])].astype(np.float64) @ (query / np.linalg.norm(query))) for chunk_id, _ in found
    ]
    assert [score for _, score in found] == pytest.approx(cosines, abs=1e-5)
    assert [score for _, score in found] == sorted((score for _, score in found), reverse=True)


def test_the_graph_is_kept_through_writes_and_dropped_below_half_the_threshold() -> None:
    vectors = clustered(600, 20, seed=10)
    index = filled(vectors, per_file=100, batch=100, ann_threshold=400)
    assert index.approximate
    index.apply(changes(20, removed=[ChunkRemoval(20, "f0"), ChunkRemoval(20, "f1")]))
    assert index.approximate and len(index) == 400
    assert all(int(chunk_id[1:]) >= 200 for chunk_id in ids(index, vectors[5], limit=50))
    index.apply(changes(21, removed=[ChunkRemoval(21, f"f{i}") for i in (2, 3, 4)]))
    assert not index.approximate and len(index) == 100
    assert ids(index, vectors[550], limit=1) == ["c550"]


def test_a_large_write_is_decoded_in_steps_and_chunks_without_embeddings_are_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vector_index, "_DECODED_AT_ONCE", 7)
    index = VectorIndex()
    index.apply(changes(1, [ChunkEntry("bare", "f", 1, "", b"")]))
    assert len(index) == 0 and index.version == 1
    vectors = clustered(50, 5)
    index.apply(changes(2, [entry(f"c{i}", "f", 2, vectors[i]) for i in range(50)], complete=True))
    assert len(index) == 50
    assert all(ids(index, vectors[i], limit=1) == [f"c{i}"] for i in range(50))


def test_a_large_graph_is_built_off_the_lock_while_searches_stay_exact_and_writes_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    vectors = clustered(3000, 100, seed=12)
    release = threading.Event()
    real_fill = vector_index._fill

    def held_fill(*args: Any) -> None:
        release.wait(30)  # the build waits until the test has written and searched meanwhile
        real_fill(*args)

    monkeypatch.setattr(vector_index, "_fill", held_fill)
    index = filled(vectors[:2000], per_file=100, ann_threshold=1500, background_from=1000)
    assert not index.approximate  # building: exact meanwhile
    assert ids(index, vectors[10], limit=1) == ["c10"]
    # Writes while it builds: one file removed, 500 chunks added (some in the removed chunks' freed slots).
    index.apply(changes(10, removed=[ChunkRemoval(10, "f0")]))
    index.apply(changes(11, [entry(f"c{i}", f"f{i // 100}", 11, vectors[i]) for i in range(2000, 2500)]))
    assert ids(index, vectors[2100], limit=1) == ["c2100"] and "c10" not in ids(index, vectors[10], limit=50)
    release.set()
    assert index.wait_for_graph(30) and index.approximate
    live = np.r_[100:2500]
    queries = clustered(50, 100, seed=13)
    found = sum(len(set(ids(index, q)) & set(exact(vectors, q, 10, live))) for q in queries)
    assert found / 500 >= 0.95
    assert all(int(chunk_id[1:]) >= 100 for q in queries for chunk_id in ids(index, q, limit=50))
    assert ids(index, vectors[2400], limit=1) == ["c2400"]


def test_a_graph_whose_build_failed_leaves_searches_exact_and_is_tried_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    vectors = clustered(1200, 50, seed=14)

    def failing_fill(graph: Any, rows: Any, slots: Any, done: Future[Any], cancelled: Any) -> None:
        done.set_exception(MemoryError("no room for the graph"))

    monkeypatch.setattr(vector_index, "_fill", failing_fill)
    index = filled(vectors[:1100], per_file=100, ann_threshold=1000, background_from=1)
    assert index.wait_for_graph(30) and not index.approximate
    assert "building a vector graph failed" in caplog.text
    assert ids(index, vectors[7], limit=1) == ["c7"]
    monkeypatch.undo()
    index.apply(changes(50, [entry(f"c{i}", "f99", 50, vectors[i]) for i in range(1100, 1200)]))
    assert index.wait_for_graph(30) and index.approximate and len(index) == 1200


def test_a_build_is_cancelled_when_its_index_starts_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    started, release = threading.Event(), threading.Event()
    real_fill = vector_index._fill
    outcomes: list[Future[Any]] = []

    def held_fill(graph: Any, rows: Any, slots: Any, done: Future[Any], cancelled: threading.Event) -> None:
        outcomes.append(done)
        started.set()
        release.wait(30)
        real_fill(graph, rows, slots, done, cancelled)

    monkeypatch.setattr(vector_index, "_fill", held_fill)
    vectors = clustered(1200, 50, seed=15)
    index = filled(vectors[:1100], per_file=100, ann_threshold=1000, background_from=1)
    assert started.wait(30)
    index.apply(changes(60, [entry("c0", "f0", 60, vectors[0])], complete=True))  # a complete answer: reset
    release.set()
    assert isinstance(outcomes[0].exception(30), vector_index.BuildCancelled)
    assert not index.approximate and len(index) == 1 and "building a vector graph failed" not in caplog.text


def test_a_process_exiting_while_a_graph_is_built_exits_cleanly() -> None:
    script = """
import sys, numpy as np
from ferryman.storage.search.chunk_feed import ChunkChanges, ChunkEntry
from ferryman.storage.search.vector_index import VectorIndex
rows = np.random.default_rng(0).standard_normal((60000, 64)).astype("<f4")
added = [ChunkEntry(f"c{i}", "f", 1, "", rows[i].tobytes()) for i in range(len(rows))]
index = VectorIndex(ann_threshold=1000, background_from=1)
index.apply(ChunkChanges(1, False, added, []))
assert not index.wait_for_graph(0)  # still building as the interpreter exits
sys.exit(0)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_an_exact_search_and_the_embedding_model_leave_blas_on_their_callers_threads() -> None:
    """BLAS's own threads cost more than the product on busy cores, and einsum's loop runs at half BLAS's speed: the
    product is BLAS's, on the searching thread. The embedding model's encode, before or after, leaves it so. In a
    process of its own: the setting is the process's."""
    script = """
import threading
import numpy as np
from threadpoolctl import threadpool_info
from ferryman.inference import minilm
from ferryman.storage.search.chunk_feed import ChunkChanges, ChunkEntry
from ferryman.storage.search.vector_index import VectorIndex

def blas_threads():
    return sorted({info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"})

if not blas_threads():
    print("no BLAS found")
    raise SystemExit
rng = np.random.default_rng(1)
rows = rng.standard_normal((3000, 64)).astype(np.float32)
rows /= np.linalg.norm(rows, axis=1, keepdims=True)
index = VectorIndex()
index.apply(ChunkChanges(1, False, [ChunkEntry(f"c{i}", "f", 1, "", rows[i].astype("<f4").tobytes())
                                    for i in range(len(rows))], []))
query = rows[7] + 0.01
found = []
steps = [threading.Thread(target=lambda: found.extend(index.nearest(query.tolist(), None, 5)))]
if minilm.installed():
    model = minilm.MiniLM()
    steps.append(threading.Thread(target=lambda: model.encode(["a ferry crosses the river"])))
for step in steps:  # one after the other, each on a thread of its own
    step.start()
    step.join()
scores = rows @ (query / np.linalg.norm(query))
assert found[0][0] == "c7", found
assert abs(found[0][1] - float(scores[7])) < 1e-5, (found[0], scores[7])
print(blas_threads())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "no BLAS found":
        pytest.skip("threadpoolctl finds no BLAS it can limit under this numpy")
    assert done.stdout.strip() == "[1]"
