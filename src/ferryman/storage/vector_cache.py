"""Exact vector search in process: a vector store's embeddings as one matrix, loaded once per version.

Backends without a vector index of their own (SQLite as Python ships it cannot
load extensions; Redis without modules) keep each chunk's unit-length float32
embedding beside its text and search here: one matrix product over the store's
chunks. The matrix is reloaded only when the store's *version* (a counter the
backend bumps with every chunk write) has moved, so a replica sees another's
writes at its next search.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cachetools import LRUCache

if TYPE_CHECKING:
    import numpy as np

# numpy (12 MiB) is imported by the first search, not with the store: a server that searches no vector store
# never loads it.


@dataclass(frozen=True)
class VectorRows:
    """What a backend loads for one store: chunk ids, their file ids, and their embeddings (one bytes each)."""

    chunk_ids: list[str]
    file_ids: list[str]
    embeddings: list[bytes]


@dataclass(frozen=True)
class _Matrix:
    version: int
    chunk_ids: list[str]
    file_ids: np.ndarray
    vectors: np.ndarray


Loader = Callable[[], Awaitable[VectorRows]]


class VectorCache:
    """The embeddings matrices of the most recently searched stores.

    Args:
        max_stores: How many stores' matrices stay in memory.
    """

    def __init__(self, max_stores: int = 32) -> None:
        self._matrices: LRUCache[str, _Matrix] = LRUCache(maxsize=max_stores)

    async def nearest(
        self,
        vector_store_id: str,
        version: int,
        load: Loader,
        query: list[float],
        file_ids: list[str] | None,
        limit: int,
    ) -> list[tuple[str, float]]:
        """``(chunk_id, cosine similarity)`` of the ``limit`` chunks nearest ``query``, best first."""
        import numpy as np

        matrix = self._matrices.get(vector_store_id)
        if matrix is None or matrix.version != version:
            matrix = _build(version, await load())
            self._matrices[vector_store_id] = matrix
        if not matrix.chunk_ids or limit <= 0:
            return []
        vector = np.asarray(query, dtype=np.float32)
        if vector.shape[0] != matrix.vectors.shape[1]:
            return []
        scores = matrix.vectors @ vector
        if file_ids is not None:
            scores = np.where(np.isin(matrix.file_ids, file_ids), scores, -np.inf)
        return [(matrix.chunk_ids[i], float(scores[i])) for i in best_first(scores, limit) if np.isfinite(scores[i])]

    def forget(self, vector_store_id: str) -> None:
        """Drop a store's matrix (it was deleted)."""
        self._matrices.pop(vector_store_id, None)


def best_first(scores: np.ndarray, limit: int) -> np.ndarray:
    """The indices of the ``limit`` highest of (non-empty) ``scores``, highest first."""
    import numpy as np

    count = min(limit, len(scores))
    best = np.argpartition(-scores, count - 1)[:count]
    return best[np.argsort(-scores[best], kind="stable")]


def _build(version: int, rows: VectorRows) -> _Matrix:
    import numpy as np

    if not rows.embeddings:
        return _Matrix(version, [], np.array([], dtype=object), np.zeros((0, 0), dtype=np.float32))
    vectors = np.frombuffer(b"".join(rows.embeddings), dtype="<f4").reshape(len(rows.embeddings), -1)
    return _Matrix(version, rows.chunk_ids, np.asarray(rows.file_ids, dtype=object), vectors)
