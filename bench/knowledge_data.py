"""What ``python -m bench --knowledge`` writes and asks: synthetic texts, clustered vectors, exact answers.

Texts are 40 to 120 words drawn from a fixed list of invented words (Zipf-like:
some words common, most rare). Vectors are unit length, of dimension 384, drawn
around centroids, as real embeddings cluster by topic: about 50 chunks per
centroid (2,000 centroids at 100,000 chunks, 20,000 at 1,000,000), each chunk
its centroid plus Gaussian noise of norm 0.5 to 1.0 times the centroid's, so a
chunk's cosine to its centroid is about 0.7 to 0.9 and to another cluster's
chunk about 0. Queries are drawn the same way (never copies of stored
vectors). ``uniform`` vectors (no clusters: every neighbour is as far as any
other) are the worst case of an approximate index, not the goal.

The bench keeps every vector it wrote, so the exact top 10 of a query is a
matrix product here, and an approximate index's recall is measured against it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import numpy as np

from ferryman.inference import minilm
from ferryman.inference.base import ChatChunk, ChatRequest, ModelInfo

DIMENSION = minilm.DIMENSION
MODEL = "bench-fixed"
CHUNKS_PER_CLUSTER = 50
MAX_CLUSTERS = 20_000
VectorKind = Literal["clustered", "uniform"]
RETRIEVAL_PASSAGES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "retrieval" / "passages.jsonl"

_SYLLABLES = ["ka", "lo", "mer", "tin", "sa", "vor", "el", "dru", "pa", "zen", "ost", "qui", "ran", "bel", "fo", "ish"]


def vocabulary(size: int = 5000) -> list[str]:
    """The fixed list of invented words (the same every run)."""
    rng = np.random.default_rng(7)
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choice(_SYLLABLES, size=int(rng.integers(2, 5))))] = None
    return list(words)


class Texts:
    """Deterministic synthetic texts: Zipf-weighted words of the fixed list."""

    def __init__(self, seed: int = 11) -> None:
        self._rng = np.random.default_rng(seed)
        self._list = vocabulary()
        self._words = np.array(self._list)
        weights = 1.0 / np.arange(1, len(self._words) + 1) ** 1.07
        self._p = weights / weights.sum()

    def one(self, low: int, high: int) -> str:
        """One text of ``low`` to ``high`` words."""
        count = int(self._rng.integers(low, high + 1))
        return " ".join(self._rng.choice(self._words, size=count, p=self._p))

    def many(self, count: int, low: int, high: int) -> list[str]:
        """``count`` texts of ``low`` to ``high`` words, drawn in one go (fast enough for a million)."""
        lengths = self._rng.integers(low, high + 1, size=count)
        drawn = self._rng.choice(len(self._words), size=int(lengths.sum()), p=self._p).tolist()
        words = [self._list[i] for i in drawn]
        bounds = np.concatenate(([0], np.cumsum(lengths))).tolist()
        return [" ".join(words[bounds[i] : bounds[i + 1]]) for i in range(count)]


def embedding_texts(count: int) -> list[str]:
    """The embedding-throughput passages: 50-70 words each, identical every run (and to earlier benches)."""
    texts = Texts(seed=3)
    return [texts.one(50, 70) for _ in range(count)]


def retrieval_passages(count: int | None = None) -> list[str]:
    """The labelled retrieval set's English passages (``tests/fixtures/retrieval``), in file order."""
    lines = RETRIEVAL_PASSAGES.read_text().splitlines()
    passages = [str(json.loads(line)["text"]) for line in lines if line.strip()]
    return passages[:count] if count is not None else passages


def clusters_for(size: int) -> int:
    """How many centroids a store of ``size`` chunks is drawn around."""
    return int(min(MAX_CLUSTERS, max(8, size // CHUNKS_PER_CLUSTER)))


def _unit(rows: np.ndarray) -> np.ndarray:
    normed: np.ndarray = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return normed


class Vectors:
    """Every vector the bench wrote (by row; row ``i`` is chunk ``chunk_i``), and fresh ones drawn alike.

    Args:
        size: Chunks of the store (sets the number of centroids).
        capacity: Rows to hold: ``size`` plus what the after-write phase adds.
        kind: ``clustered`` (the goal) or ``uniform`` (the worst case).
        seed: Of the random generator.
    """

    def __init__(self, size: int, capacity: int, kind: VectorKind = "clustered", seed: int = 13) -> None:
        self.kind = kind
        self._rng = np.random.default_rng(seed)
        self._centroids = _unit(self._rng.standard_normal((clusters_for(size), DIMENSION), dtype=np.float32))
        self.matrix = np.empty((capacity, DIMENSION), dtype=np.float32)
        self.matrix.fill(0.0)  # touched now, so that the stores' memory growth measured later excludes it
        self.alive = np.zeros(capacity, dtype=bool)
        self.count = 0

    @property
    def clusters(self) -> int:
        """How many centroids."""
        return len(self._centroids)

    def pick_clusters(self, count: int) -> np.ndarray:
        """``count`` centroid numbers at random (a file's topics)."""
        return self._rng.choice(len(self._centroids), size=count, replace=False)

    def draw(self, count: int, clusters: np.ndarray | None = None) -> np.ndarray:
        """``count`` new unit vectors (not stored), around any centroid or around one of ``clusters``."""
        if self.kind == "uniform":
            return _unit(self._rng.standard_normal((count, DIMENSION), dtype=np.float32))
        pool = clusters if clusters is not None else np.arange(len(self._centroids))
        centres = self._centroids[self._rng.choice(pool, size=count)]
        noise = _unit(self._rng.standard_normal((count, DIMENSION), dtype=np.float32))
        spread = self._rng.uniform(0.5, 1.0, size=(count, 1)).astype(np.float32)
        return _unit(centres + spread * noise)

    def take(self, count: int, clusters: np.ndarray | None = None) -> tuple[int, np.ndarray]:
        """Draw ``count`` vectors and keep them as the next rows; their first row and the vectors."""
        start = self.count
        if start + count > len(self.matrix):
            raise ValueError(f"the bench holds {len(self.matrix)} vectors; {start + count} asked")
        vectors = self.draw(count, clusters)
        self.matrix[start : start + count] = vectors
        self.alive[start : start + count] = True
        self.count += count
        return start, vectors

    def drop(self, start: int, count: int) -> None:
        """Rows no longer in the store (their file's chunks were removed)."""
        self.alive[start : start + count] = False

    def exact(self, query: np.ndarray, k: int = 10) -> list[int]:
        """Rows of the ``k`` stored vectors nearest ``query`` by cosine (exact), best first."""
        scores = self.matrix[: self.count] @ query.astype(np.float32)
        scores[~self.alive[: self.count]] = -np.inf
        k = min(k, int(self.alive[: self.count].sum()))
        top = np.argpartition(-scores, k - 1)[:k]
        return [int(row) for row in top[np.argsort(-scores[top])]]


def chunk_id(row: int) -> str:
    """The id of the chunk stored from vector row ``row``."""
    return f"chunk_{row}"


def recall(found: list[str], exact: list[int]) -> float:
    """The share of the exact top-k the store's answer holds (1.0 when nothing was expected)."""
    if not exact:
        return 1.0
    expected = {chunk_id(row) for row in exact}
    return len(expected & set(found[: len(exact)])) / len(expected)


class FixedEmbeddings:
    """An embedding provider that answers each registered query text with its registered vector.

    The query's vector is what the bench chose (drawn like the stored ones), so the
    exact answer is known; an unregistered text gets a fresh vector drawn alike.
    """

    provider_id = "bench"

    def __init__(self, vectors: Vectors) -> None:
        self._vectors = vectors
        self._table: dict[str, np.ndarray] = {}

    def register(self, text: str, vector: np.ndarray) -> str:
        """Answer ``text`` (made unique by a suffix if taken) with ``vector``; the text to ask with."""
        unique, n = text, 0
        while unique in self._table:
            n += 1
            unique = f"{text} q{n}"
        self._table[unique] = vector
        return unique

    async def list_models(self) -> list[ModelInfo]:
        """The one embedding model."""
        return [ModelInfo(MODEL, "embedding", {"embedding_dimension": DIMENSION})]

    async def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        """The registered vector of each text."""
        rows = [self._table[t] if t in self._table else self._vectors.draw(1)[0] for t in texts]
        embedded: list[list[float]] = np.asarray(rows, dtype=np.float32).tolist()
        return embedded

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """Not a chat model."""
        raise NotImplementedError("an embedding provider does not chat")
        yield

    async def aclose(self) -> None:
        """Nothing to release."""
        return None
