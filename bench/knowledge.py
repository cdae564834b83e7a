"""``python -m bench --knowledge``: ingestion throughput and search latency of the chunk index, per backend.

For each backend (SQLite always; PostgreSQL and Redis when their URLs are given)
and each size (10,000 and 100,000 chunks by default), it fills one vector store
with synthetic chunks and measures:

* ingestion: chunks/s written by ``add_chunks`` in batches of 500, embeddings
  precomputed (the store's own cost: index and full-text upkeep, not the model's);
* search: p50/p95 latency of ``SearchService.search`` in keyword, vector and
  hybrid mode, 10 results, over queries of three to six words; the first query of
  each mode (which loads a backend's in-process index) is timed apart as ``cold``.

Chunks are synthetic on purpose, to reach 100,000 without a corpus: 40 to 120
words drawn from a fixed word list (Zipf-like, so some words are common and
some rare) and random unit vectors of dimension 384. Their ranking is
meaningless; the retrieval set in ``tests/fixtures/retrieval`` measures quality.
Separately, the local embedding model's throughput (texts/s, 64 passages of
about 60 words) is measured once. Nothing here runs as a timed test.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ferryman.inference import minilm
from ferryman.inference.base import ChatChunk, ChatRequest, ModelInfo
from ferryman.inference.router import ModelRouter
from ferryman.knowledge.results import SearchMode, SearchQuery
from ferryman.knowledge.search import SearchService
from ferryman.storage.base import Store
from ferryman.storage.knowledge import ChunkRecord, VectorStoreRecord
from ferryman.storage.sqlite import SqliteStore

from .report import note
from .stats import Figure, figure, percentile

DIMENSION = minilm.DIMENSION
MODEL = "bench-random"
BATCH = 500
MODES: tuple[SearchMode, ...] = ("keyword", "vector", "hybrid")
SIZES = {"full": (10_000, 100_000), "quick": (10_000,), "smoke": (300,)}
QUERIES = {"full": 100, "quick": 50, "smoke": 5}

_SYLLABLES = ["ka", "lo", "mer", "tin", "sa", "vor", "el", "dru", "pa", "zen", "ost", "qui", "ran", "bel", "fo", "ish"]


def _vocabulary(size: int = 5000) -> list[str]:
    rng = np.random.default_rng(7)
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choice(_SYLLABLES, size=int(rng.integers(2, 5))))] = None
    return list(words)


class _Corpus:
    """Deterministic synthetic chunks and queries."""

    def __init__(self, seed: int = 11) -> None:
        self._rng = np.random.default_rng(seed)
        self._words = np.array(_vocabulary())
        weights = 1.0 / np.arange(1, len(self._words) + 1) ** 1.07
        self._p = weights / weights.sum()

    def text(self, low: int, high: int) -> str:
        count = int(self._rng.integers(low, high + 1))
        return " ".join(self._rng.choice(self._words, size=count, p=self._p))

    def vectors(self, count: int) -> np.ndarray:
        raw = self._rng.standard_normal((count, DIMENSION)).astype(np.float32)
        normed: np.ndarray = raw / np.linalg.norm(raw, axis=1, keepdims=True)
        return normed


class _RandomEmbeddings:
    """An embedding provider of random unit vectors (query embedding is not what is timed here)."""

    provider_id = "bench"

    def __init__(self, corpus: _Corpus) -> None:
        self._corpus = corpus

    async def list_models(self) -> list[ModelInfo]:
        return [ModelInfo(MODEL, "embedding", {"embedding_dimension": DIMENSION})]

    async def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self._corpus.vectors(len(texts)).tolist()
        return vectors

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        raise NotImplementedError("an embedding provider does not chat")
        yield

    async def aclose(self) -> None:
        return None


Opener = Callable[[], AbstractAsyncContextManager[Store]]


def openers(tmp: Path, postgres: str | None, redis: str | None) -> dict[str, Opener]:
    """The backends to measure: SQLite in ``tmp``; PostgreSQL and Redis at their URLs (a scratch schema/prefix)."""
    found: dict[str, Opener] = {}

    @asynccontextmanager
    async def sqlite() -> AsyncIterator[Store]:
        store = SqliteStore(str(tmp / f"knowledge-{uuid.uuid4().hex[:8]}.db"))
        await store.open()
        try:
            yield store
        finally:
            await store.close()

    found["sqlite"] = sqlite
    if postgres:
        found["postgres"] = lambda: _postgres(postgres)
    if redis:
        found["redis"] = lambda: _redis(redis)
    return found


@asynccontextmanager
async def _postgres(url: str) -> AsyncIterator[Store]:
    import asyncpg

    from ferryman.storage.postgres import PostgresStore

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(url, schema=schema)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
        admin = await asyncpg.connect(url)
        try:
            await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await admin.close()


@asynccontextmanager
async def _redis(url: str) -> AsyncIterator[Store]:
    from redis.asyncio import Redis

    from ferryman.storage.redis_store import RedisStore

    prefix = f"bench_{uuid.uuid4().hex[:10]}:"
    store = RedisStore(url, prefix=prefix)
    await store.open()
    try:
        yield store
    finally:
        await store.close()
        admin = Redis.from_url(url)
        try:
            keys = [key async for key in admin.scan_iter(match=f"{prefix}*", count=1000)]
            for start in range(0, len(keys), 1000):
                await admin.delete(*keys[start : start + 1000])
        finally:
            await admin.aclose()


async def _fill(store: Store, store_id: str, size: int, corpus: _Corpus) -> float:
    """Write ``size`` chunks; return the seconds spent in ``add_chunks`` alone."""
    now = int(time.time())
    record = VectorStoreRecord(store_id, "bench", now, MODEL, DIMENSION, last_active_at=now)
    await store.create_vector_store(record, [])
    spent = 0.0
    for start in range(0, size, BATCH):
        count = min(BATCH, size - start)
        vectors = corpus.vectors(count)
        chunks = [
            ChunkRecord(
                chunk_id=f"chunk_{start + i}",
                vector_store_id=store_id,
                file_id=f"file_{(start + i) // 20}",
                position=(start + i) % 20,
                text=corpus.text(40, 120),
                embedding=vectors[i].tobytes(),
            )
            for i in range(count)
        ]
        began = time.perf_counter()
        await store.add_chunks(store_id, chunks)
        spent += time.perf_counter() - began
    return spent


async def _latencies(search: SearchService, store_id: str, mode: SearchMode, queries: list[str]) -> list[float]:
    samples: list[float] = []
    for text in queries:
        began = time.perf_counter()
        await search.search(SearchQuery([store_id], text, max_num_results=10, mode=mode))
        samples.append((time.perf_counter() - began) * 1000.0)
    return samples


async def _measure(backend: str, opener: Opener, size: int, queries: int) -> list[Figure]:
    corpus = _Corpus()
    texts = [corpus.text(3, 6) for _ in range(queries + 1)]
    figures: list[Figure] = []
    async with opener() as store:
        store_id = f"vs_bench_{size}"
        note(f"knowledge: {backend}, {size} chunks: ingesting")
        spent = await _fill(store, store_id, size, corpus)
        figures.append(
            figure(
                f"knowledge.{backend}.n{size}.ingest",
                f"{backend}: add_chunks, {size} chunks in batches of {BATCH}",
                "chunks/s",
                [size / spent],
                0,
                "knowledge",
            )
        )
        router = ModelRouter([_RandomEmbeddings(corpus)])
        await router.refresh()
        search = SearchService(store, router)
        for mode in MODES:
            note(f"knowledge: {backend}, {size} chunks: {mode} search")
            cold, *warm = await _latencies(search, store_id, mode, texts)
            name = f"knowledge.{backend}.n{size}.{mode}"
            label = f"{backend}: {mode} search, {size} chunks"
            figures.append(figure(f"{name}.cold", f"{label}, first query", "ms", [cold], 0, "knowledge"))
            figures.append(figure(f"{name}.p50", f"{label}, p50", "ms", [percentile(warm, 50)], 0, "knowledge"))
            figures.append(figure(f"{name}.p95", f"{label}, p95", "ms", [percentile(warm, 95)], 0, "knowledge"))
    return figures


def _embedding_throughput(samples: int) -> Figure:
    corpus = _Corpus(seed=3)
    texts = [corpus.text(50, 70) for _ in range(samples)]
    encoder = minilm.MiniLM()
    encoder.encode(texts[:4])  # warm: the first call allocates
    began = time.perf_counter()
    encoder.encode(texts)
    rate = samples / (time.perf_counter() - began)
    label = f"local all-MiniLM-L6-v2 (numpy), {samples} passages of 50-70 words"
    return figure("knowledge.embed.local_minilm", label, "texts/s", [rate], 0, "knowledge")


def run_knowledge(mode: str, tmp: Path, postgres: str | None, redis: str | None) -> list[Figure]:
    """Every knowledge figure for a mode (``full``, ``quick`` or ``smoke``)."""
    figures: list[Figure] = []
    if minilm.installed():
        figures.append(_embedding_throughput(8 if mode == "smoke" else 64))
    else:
        note("knowledge: the local embedding model is not installed; its throughput is not measured")
    for backend, opener in openers(tmp, postgres, redis).items():
        for size in SIZES[mode]:
            figures.extend(asyncio.run(_measure(backend, opener, size, QUERIES[mode])))
    return figures


def describe() -> dict[str, Any]:
    """What the knowledge figures are made of, for the results' metadata."""
    return {
        "knowledge.corpus": "synthetic: 40-120 words from a 5,000-word Zipf list, random unit vectors (dim 384)",
        "knowledge.batch": BATCH,
    }
