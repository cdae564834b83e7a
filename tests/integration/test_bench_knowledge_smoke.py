"""``python -m bench --knowledge`` runs end to end at its tiny size and writes every expected figure.

Nothing here asserts a timing: only that each figure exists with a unit and a value in its range,
that recall is a share, and that no search right after a removal found a removed chunk.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import pytest
from bench.__main__ import main as bench_main
from bench.embedding import flops
from bench.knowledge import MILLION, PLANS, sizes_for
from bench.knowledge_data import VectorKind, Vectors, chunk_id, recall
from storage_backends import CONNECT_TIMEOUT, POSTGRES_URL, require_server

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 300  # not a timing assertion: only stops a hung run from blocking the suite
PREFIX = "knowledge.sqlite.n250"  # --sizes 250 replaces the smoke size, 300
STEADY = {f"{mode}.{stat}" for mode in ("keyword", "vector", "hybrid") for stat in ("cold", "p50", "p95")}
AFTER_WRITE = {
    f"after_write.{mode}.{stat}" for mode in ("keyword", "vector") for stat in ("p50", "p95", "add.p50", "remove.p50")
}
OTHERS = {"ingest", "memory.rss_growth", "memory.held_growth", "restart.open", "restart.keyword", "restart.vector"}
GRAPH_WAITS = {"vector.graph_wait", "hybrid.graph_wait", "restart.vector_graph"}
RECALLS = {"vector.recall10", "vector.recall10_mean", "after_write.vector.recall10_mean"}
MEMORY = {"memory.rss_growth", "memory.held_growth"}

pytestmark = pytest.mark.integration


def _bench(out: Path, *args: str) -> dict[str, Any]:
    """Run ``python -m bench --knowledge --smoke`` with ``args``; the results document."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--knowledge", "--smoke", *args, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-6000:]}"
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def test_knowledge_bench_writes_every_figure(tmp_path: Path) -> None:
    document = _bench(tmp_path / "knowledge.json", "--sizes", "250")
    figures = document["figures"]
    embedding = {"", ".retrieval_set", ".gflops", ".blas_peak", ".share_of_peak", ".ceiling"}
    expected = {f"knowledge.embed.local_minilm{suffix}" for suffix in embedding} | {
        f"{PREFIX}.{suffix}" for suffix in STEADY | AFTER_WRITE | OTHERS | RECALLS | GRAPH_WAITS
    }
    assert expected <= set(figures), sorted(expected - set(figures))
    assert not [name for name in figures if ".n300." in name], "the mode's own size ran beside --sizes"
    assert document["meta"]["knowledge.vectors"] == "clustered"
    for name, fig in figures.items():
        assert fig["unit"], name
        assert isinstance(fig["value"], int | float) and math.isfinite(fig["value"]), name
        suffix = name.removeprefix(f"{PREFIX}.")
        if suffix in RECALLS:
            assert 0.0 <= fig["min"] <= fig["max"] <= 1.0, name
        elif suffix in GRAPH_WAITS:
            # A wait finds the graph built already, or none to build, within the 0.1 ms figures are rounded to.
            assert fig["value"] >= 0, name
        elif suffix not in MEMORY:
            assert fig["value"] > 0, name
    for suffix in AFTER_WRITE | {"after_write.vector.recall10_mean"}:
        assert figures[f"{PREFIX}.{suffix}"]["errors"] == 0, f"{suffix}: a removed chunk was found"


@pytest.mark.anyio
async def test_postgres_bulk_load_builds_the_vector_index_after_the_fill(tmp_path: Path) -> None:
    async def probe() -> None:
        connection = await asyncpg.connect(POSTGRES_URL, timeout=CONNECT_TIMEOUT)
        await connection.close()

    await require_server("PostgreSQL", POSTGRES_URL, "FERRYMAN_TEST_POSTGRES_URL", probe)
    args = ("--sizes", "300", "--backends", "postgres", "--postgres", POSTGRES_URL, "--bulk")
    document = await asyncio.to_thread(_bench, tmp_path / "bulk.json", *args)
    figures = document["figures"]
    assert document["meta"]["knowledge.backends"] == ["postgres"]
    assert document["meta"]["knowledge.bulk"] is True
    assert not [name for name in figures if name.startswith("knowledge.sqlite.")], "--backends left SQLite in"
    prefix = "knowledge.postgres.n300"
    assert "the vector index dropped" in figures[f"{prefix}.ingest"]["label"]
    assert figures[f"{prefix}.index_build"]["value"] > 0
    assert figures[f"{prefix}.vector.recall10"]["min"] >= 0.0
    assert figures[f"{prefix}.after_write.vector.p50"]["errors"] == 0


@pytest.mark.parametrize("args", [["--full"], ["--sizes", "1000"], ["--backends", "sqlite"], ["--bulk"]])
def test_what_knowledge_measures_is_refused_without_knowledge(args: list[str]) -> None:
    with pytest.raises(SystemExit, match="they take it"):
        bench_main(args)


@pytest.mark.parametrize("backends", ["mysql", "sqlite,", ""])
def test_backends_must_be_known(backends: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench_main(["--knowledge", "--backends", backends])
    assert "--backends" in capsys.readouterr().err


@pytest.mark.parametrize("sizes", ["0", "10,x", ""])
def test_sizes_must_be_positive_counts(sizes: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench_main(["--knowledge", "--sizes", sizes])
    assert "--sizes" in capsys.readouterr().err


def test_sizes_replace_the_plan_and_full_adds_a_million_where_it_runs() -> None:
    plan = PLANS["full"]
    assert sizes_for(plan, "sqlite", False) == (10_000, 100_000)
    assert sizes_for(plan, "sqlite", False, (2_000,)) == (2_000,)
    assert sizes_for(plan, "postgres", True, (2_000,)) == (2_000, MILLION)
    assert sizes_for(plan, "postgres", True, (MILLION,)) == (MILLION,)
    assert sizes_for(plan, "redis", True, (2_000,)) == (2_000,)


def test_the_embedding_models_operations_are_counted_per_token_and_per_pair_of_tokens() -> None:
    one = flops([1])
    assert one == 6 * (2 * (384 * 1152 + 384 * 384 + 2 * 384 * 1536) + 4 * 384)
    assert flops([10, 20]) == flops([10]) + flops([20])
    per_token, per_pair = 6 * 2 * 1_769_472, 6 * 4 * 384
    assert flops([100]) == 100 * per_token + 100 * 100 * per_pair


def test_exact_answers_follow_what_the_bench_wrote() -> None:
    vectors = Vectors(size=400, capacity=500)
    start, written = vectors.take(400)
    query = vectors.draw(1)[0]
    brute = np.argsort(-(written @ query))[:10]
    assert vectors.exact(query) == [start + int(row) for row in brute]
    vectors.drop(start + int(brute[0]), 1)
    assert start + int(brute[0]) not in vectors.exact(query)
    assert recall([chunk_id(row) for row in vectors.exact(query)], vectors.exact(query)) == 1.0
    assert recall([chunk_id(row) for row in vectors.exact(query)[:5]], vectors.exact(query)) == 0.5


def test_clustered_queries_have_near_neighbours_and_uniform_ones_do_not() -> None:
    def nearest_cosine(kind: VectorKind) -> float:
        vectors = Vectors(size=2000, capacity=2000, kind=kind)
        vectors.take(2000)
        queries = vectors.draw(20)
        return float(np.median((vectors.matrix @ queries.T).max(axis=0)))

    clustered, uniform = nearest_cosine("clustered"), nearest_cosine("uniform")
    assert clustered > 0.5, clustered
    assert uniform < 0.3, uniform
