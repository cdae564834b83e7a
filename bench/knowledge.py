"""``python -m bench --knowledge``: ingestion, search latency and recall of the chunk index, per backend.

For each backend (SQLite always; PostgreSQL and Redis when their URLs are given)
and each size (``--quick``: 10,000 chunks; default: 10,000 and 100,000;
``--full``: also 1,000,000 on SQLite and PostgreSQL), it fills one vector store
with synthetic chunks (see :mod:`bench.knowledge_data`) through the public store
and search API only, so it measures whatever the stores do, and reports:

* ingest: chunks/s written by ``add_chunks`` in batches of 500 (embeddings
  precomputed: the store's cost, not the model's); on PostgreSQL at 1,000,000
  chunks (or at every size with ``--bulk``), with the vector index dropped,
  then ``index_build``: the seconds its one ``CREATE INDEX`` took after the fill;
* steady state: p50/p95 of ``SearchService.search`` in keyword, vector and hybrid
  mode, 10 results; the first search of each mode timed apart as ``cold`` (it
  builds whatever in-process index the backend keeps);
* recall@10 of vector search against the exact top 10 (computed here over the
  vectors the bench wrote): the median over queries, with min..max, and the mean;
* memory: this process's RSS growth over filling and the first searches (the
  stores run in process) and what the backend holds for the store;
* right after a write: one write (add a file of 500 chunks, or remove the file
  added before) then one search, alternately, per mode (keyword, vector); the
  search's p50/p95, the writes' p50, vector recall@10 against the live chunks,
  and, as errors, results that name a chunk already removed;
* restart: a store opened again on the same data; the open and the first
  keyword and vector searches (an in-process index is rebuilt here).

Each timed loop stops early after ``budget_s`` once 5 searches are done, so that
a slow backend at 1,000,000 chunks cannot stall the run; labels give the count.
The local embedding model's throughput is measured on fixed texts: the same 64
synthetic passages as every earlier bench, and the retrieval set's 200 English
passages, beside the most this machine's BLAS allows it (:mod:`bench.embedding`). Nothing here runs as a timed test.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ferryman.inference import minilm
from ferryman.inference.router import ModelRouter
from ferryman.knowledge.results import SearchMode, SearchQuery
from ferryman.knowledge.search import SearchService
from ferryman.storage.base import Store
from ferryman.storage.domain.vector_stores import vector_stores
from ferryman.storage.knowledge import ChunkRecord, VectorStoreFileRecord, VectorStoreRecord

from .embedding import embedding_figures
from .knowledge_backends import BACKENDS, Site, SiteFactory, rss_bytes, sites
from .knowledge_data import (
    DIMENSION,
    MODEL,
    FixedEmbeddings,
    Texts,
    VectorKind,
    Vectors,
    chunk_id,
    recall,
)
from .report import note
from .stats import Figure, figure, percentile

BATCH = 500
MODES: tuple[SearchMode, ...] = ("keyword", "vector", "hybrid")
AFTER_WRITE_MODES: tuple[SearchMode, ...] = ("keyword", "vector")
MILLION = 1_000_000
MILLION_BACKENDS = ("sqlite", "postgres")
MIN_SEARCHES = 5
GRAPH_WAIT_S = 1800.0
MIB = 1024 * 1024
GROUP = "knowledge"


@dataclass(frozen=True)
class Plan:
    """How much one mode measures."""

    sizes: tuple[int, ...]
    queries: int
    writes: int
    """Writes (and searches) per mode in the after-write phase."""
    write_chunks: int
    budget_s: float
    """Seconds after which a timed loop stops (once ``MIN_SEARCHES`` are done)."""
    embed_texts: int
    embed_repeats: int


PLANS = {
    "smoke": Plan((300,), queries=5, writes=4, write_chunks=50, budget_s=30, embed_texts=8, embed_repeats=1),
    "quick": Plan((10_000,), queries=50, writes=20, write_chunks=BATCH, budget_s=60, embed_texts=64, embed_repeats=3),
    "full": Plan((10_000, 100_000), queries=100, writes=20, write_chunks=BATCH, budget_s=90, embed_texts=64,
                 embed_repeats=3),
}  # fmt: skip


def _ms(seconds: float) -> float:
    return seconds * 1000.0


def _row(found_id: str) -> int:
    return int(found_id.rsplit("_", 1)[1])


class _Run:
    """One backend at one size: its data, its store and the searches asked of it."""

    def __init__(self, backend: str, size: int, plan: Plan, kind: VectorKind, bulk: bool = False) -> None:
        self.backend, self.size, self.plan = backend, size, plan
        self.bulk = bulk or size >= MILLION
        files = math.ceil(plan.writes / 2) * len(AFTER_WRITE_MODES)
        self.vectors = Vectors(size, size + files * plan.write_chunks, kind)
        self.texts = Texts()
        self.embeddings = FixedEmbeddings(self.vectors)
        self.store_id = f"vs_bench_{size}"
        self.figures: list[Figure] = []

    def add(self, suffix: str, label: str, unit: str, values: list[float], errors: int = 0) -> None:
        kinds = {"deleted_chunk_found": errors} if errors else None
        name = f"knowledge.{self.backend}.n{self.size}.{suffix}"
        self.figures.append(figure(name, f"{self.backend}, {self.size:,}: {label}", unit, values, errors, GROUP,
                                   error_kinds=kinds))  # fmt: skip

    def query(self, clusters: np.ndarray | None = None) -> tuple[str, np.ndarray]:
        """A query's text (registered with a fresh vector drawn like the stored ones) and that vector."""
        vector = self.vectors.draw(1, clusters)[0]
        return self.embeddings.register(self.texts.one(3, 6), vector), vector

    async def searcher(self, store: Store) -> SearchService:
        router = ModelRouter([self.embeddings])
        await router.refresh()
        return SearchService(store, router, vector_stores(store.kernel))

    async def ask(self, search: SearchService, text: str, mode: SearchMode) -> tuple[float, list[str]]:
        """One search: its milliseconds and the chunk ids found."""
        began = time.perf_counter()
        outcome = await search.search(SearchQuery([self.store_id], text, max_num_results=10, mode=mode))
        return _ms(time.perf_counter() - began), [r.chunk_id for r in outcome.results]

    def stale(self, found: list[str]) -> int:
        """How many of the chunks found were removed already."""
        return sum(1 for f in found if not self.vectors.alive[_row(f)])

    def chunks(self, start: int, vectors: np.ndarray, file_of: Any) -> list[ChunkRecord]:
        bodies = self.texts.many(len(vectors), 40, 120)
        return [
            ChunkRecord(chunk_id(start + i), self.store_id, file_of(start + i), (start + i) % 20, bodies[i],
                        vectors[i].tobytes())
            for i in range(len(vectors))
        ]  # fmt: skip

    async def fill(self, store: Store, site: Site) -> None:
        now = int(time.time())
        record = VectorStoreRecord(self.store_id, "bench", now, MODEL, DIMENSION, last_active_at=now)
        await store.create_vector_store(record, [])
        bulk = site.bulk if self.bulk else None
        if bulk is not None:
            await bulk.drop()
        spent = 0.0
        for begun in range(0, self.size, BATCH):
            start, vectors = self.vectors.take(min(BATCH, self.size - begun))
            chunks = self.chunks(start, vectors, lambda row: f"file_{row // 20}")
            began = time.perf_counter()
            await store.add_chunks(self.store_id, chunks)
            spent += time.perf_counter() - began
        dropped = ", the vector index dropped" if bulk is not None else ""
        self.add("ingest", f"add_chunks in batches of {BATCH}{dropped}", "chunks/s", [self.size / spent])
        if bulk is not None:
            note(f"knowledge: {self.backend}, {self.size} chunks: building the vector index")
            began = time.perf_counter()
            await bulk.build()
            self.add("index_build", f"vector index built after the fill ({bulk.label})", "s",
                     [time.perf_counter() - began])  # fmt: skip

    async def graph_built(self, store: Store, name: str, label: str) -> None:
        """Where the store builds an HNSW graph of its vectors in the background after a first search (SQLite and
        Redis past ``ann_threshold``), wait for it and report how long that took; searches are exact meanwhile."""
        search_in_process = getattr(store, "_search", None)  # the stores' in-process indexes: not a public API
        if search_in_process is None:
            return
        began = time.perf_counter()
        if not await search_in_process.graph_built(self.store_id, GRAPH_WAIT_S):
            note(f"knowledge: {self.backend}, {self.size} chunks: no graph after {GRAPH_WAIT_S:.0f} s")
        self.add(name, label, "s", [time.perf_counter() - began])

    async def steady(self, store: Store, search: SearchService) -> None:
        for mode in MODES:
            note(f"knowledge: {self.backend}, {self.size} chunks: {mode} search")
            latencies: list[float] = []
            recalls: list[float] = []
            began = time.monotonic()
            for _ in range(self.plan.queries + 1):
                text, vector = self.query()
                ms, found = await self.ask(search, text, mode)
                latencies.append(ms)
                if mode == "vector" and len(latencies) > 1:  # the first may be exact: a graph is built after it
                    recalls.append(recall(found, self.vectors.exact(vector)))
                if len(latencies) == 1 and mode != "keyword":  # the steady state is through the graph, once built
                    await self.graph_built(store, f"{mode}.graph_wait", f"wait for the graph after the first {mode} "
                                           "search (built in the background; 0 when none is)")  # fmt: skip
                    began = time.monotonic()
                if len(latencies) > MIN_SEARCHES and time.monotonic() - began > self.plan.budget_s:
                    break
            cold, *warm = latencies
            self.add(f"{mode}.cold", f"{mode} search, first after filling (cold)", "ms", [cold])
            for q in (50, 95):
                self.add(f"{mode}.p{q}", f"{mode} search, p{q} of {len(warm)}", "ms", [percentile(warm, q)])
            if recalls:
                self.add("vector.recall10", f"vector recall@10 vs exact, median [min..max] of {len(recalls)}",
                         "recall", recalls)  # fmt: skip
                self.add("vector.recall10_mean", "vector recall@10 vs exact, mean", "recall",
                         [statistics.fmean(recalls)])  # fmt: skip

    async def after_writes(self, store: Store, search: SearchService, mode: SearchMode) -> None:
        note(f"knowledge: {self.backend}, {self.size} chunks: {mode} search right after writes")
        files = [f"after_{mode}_{k}" for k in range(math.ceil(self.plan.writes / 2))]
        now = int(time.time())
        await store.add_vector_store_files(
            self.store_id, [VectorStoreFileRecord(self.store_id, f, now, status="completed") for f in files]
        )
        latencies: list[float] = []
        writes: dict[str, list[float]] = {"add": [], "remove": []}
        recalls: list[float] = []
        stale, start, clusters, chunks = 0, 0, self.vectors.pick_clusters(5), []
        began = time.monotonic()
        for step in range(self.plan.writes):
            file_id = files[step // 2]
            if step % 2 == 0:  # add a file of chunks on a few topics; the query is about one of them
                clusters = self.vectors.pick_clusters(5)
                start, vectors = self.vectors.take(self.plan.write_chunks, clusters)
                chunks = self.chunks(start, vectors, lambda row, f=file_id: f)
                tick = time.perf_counter()
                await store.add_chunks(self.store_id, chunks)
                writes["add"].append(_ms(time.perf_counter() - tick))
            else:  # remove that file; the query is about what it held
                tick = time.perf_counter()
                await store.delete_vector_store_file(self.store_id, file_id)
                writes["remove"].append(_ms(time.perf_counter() - tick))
                self.vectors.drop(start, len(chunks))
            if mode == "keyword":
                text = " ".join(np.random.default_rng(step).choice(chunks[0].text.split(), size=3))
            else:
                text, vector = self.query(clusters)
            ms, found = await self.ask(search, text, mode)
            latencies.append(ms)
            stale += self.stale(found)
            if mode == "vector":
                recalls.append(recall(found, self.vectors.exact(vector)))
            if step % 2 and len(latencies) >= MIN_SEARCHES and time.monotonic() - began > self.plan.budget_s:
                break
        name, label = f"after_write.{mode}", f"{mode} search right after a write"
        for q in (50, 95):
            self.add(f"{name}.p{q}", f"{label}, p{q} of {len(latencies)}", "ms", [percentile(latencies, q)], stale)
        if recalls:
            self.add(f"{name}.recall10_mean", f"{label}, recall@10 vs exact (live chunks), mean", "recall",
                     [statistics.fmean(recalls)], stale)  # fmt: skip
        self.add(f"after_write.{mode}.add.p50", f"add {self.plan.write_chunks} chunks (before {mode} searches), p50",
                 "ms", [percentile(writes["add"], 50)])  # fmt: skip
        self.add(f"after_write.{mode}.remove.p50", f"remove a file's chunks (before {mode} searches), p50", "ms",
                 [percentile(writes["remove"], 50)])  # fmt: skip

    async def restart(self, site: Site) -> None:
        note(f"knowledge: {self.backend}, {self.size} chunks: opened again")
        async with AsyncExitStack() as stack:
            began = time.perf_counter()
            store = await stack.enter_async_context(site.open())
            self.add("restart.open", "store opened again on the same data", "ms", [_ms(time.perf_counter() - began)])
            search = await self.searcher(store)
            for mode in AFTER_WRITE_MODES:
                ms, _ = await self.ask(search, self.query()[0], mode)
                self.add(f"restart.{mode}", f"first {mode} search after opening again", "ms", [ms])
            await self.graph_built(store, "restart.vector_graph", "then the graph built in the background")

    async def measure(self, make_site: SiteFactory) -> list[Figure]:
        async with make_site() as site:
            rss, held = rss_bytes(), await site.held_bytes()
            async with site.open() as store:
                note(f"knowledge: {self.backend}, {self.size} chunks: ingesting")
                await self.fill(store, site)
                search = await self.searcher(store)
                await self.steady(store, search)
                self.add("memory.rss_growth", "RSS growth of the bench (stores in process): fill and first searches",
                         "MiB", [(rss_bytes() - rss) / MIB])  # fmt: skip
                self.add("memory.held_growth", f"growth of the {site.held_label}", "MiB",
                         [(await site.held_bytes() - held) / MIB])  # fmt: skip
                for mode in AFTER_WRITE_MODES:
                    await self.after_writes(store, search, mode)
            await self.restart(site)
        return self.figures


def sizes_for(plan: Plan, backend: str, million: bool, sizes: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """The sizes measured on a backend: ``sizes`` or the plan's, and 1,000,000 with ``--full`` (not on Redis)."""
    chosen = plan.sizes if sizes is None else sizes
    return (*chosen, MILLION) if million and backend in MILLION_BACKENDS and MILLION not in chosen else chosen


def run_knowledge(
    mode: str,
    tmp: Path,
    postgres: str | None,
    redis: str | None,
    million: bool = False,
    kind: VectorKind = "clustered",
    sizes: tuple[int, ...] | None = None,
    backends: tuple[str, ...] = BACKENDS,
    bulk: bool = False,
) -> list[Figure]:
    """Every knowledge figure for a mode (``full``, ``quick`` or ``smoke``).

    ``sizes`` replaces the mode's chunk counts; ``million`` adds 1,000,000 chunks. ``backends`` limits the
    backends measured (PostgreSQL and Redis need their URLs too). ``bulk`` fills PostgreSQL with its vector
    index dropped, built after the fill, at every size (always at 1,000,000: filling a million chunks through
    a live index takes hours on a small machine).
    """
    plan = PLANS[mode]
    figures: list[Figure] = []
    if minilm.installed():
        figures.extend(embedding_figures(plan.embed_texts, plan.embed_repeats))
    else:
        note("knowledge: the local embedding model is not installed; its throughput is not measured")
    for backend, make_site in sites(tmp, postgres, redis, backends).items():
        for size in sizes_for(plan, backend, million, sizes):
            figures.extend(asyncio.run(_Run(backend, size, plan, kind, bulk).measure(make_site)))
    return figures


def describe(kind: VectorKind = "clustered") -> dict[str, Any]:
    """What the knowledge figures are made of, for the results' metadata."""
    vectors = (
        "clustered unit vectors (dim 384): ~50 chunks per centroid, noise 0.5-1.0 x the centroid"
        if kind == "clustered"
        else "uniform random unit vectors (dim 384): the worst case of an approximate index"
    )
    return {
        "knowledge.corpus": f"synthetic: 40-120 words from a 5,000-word Zipf list; {vectors}",
        "knowledge.vectors": kind,
        "knowledge.batch": BATCH,
    }
