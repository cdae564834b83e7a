"""Embedding chunks for a vector store: in batches, with the store's model, stored unit-length."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ferryman.errors import UpstreamError
from ferryman.inference.router import ModelRouter
from ferryman.storage.knowledge import ChunkRecord, VectorStoreRecord

if TYPE_CHECKING:
    import numpy as np

BATCH = 64
"""Texts per embedding call: small enough for a remote server's request limits."""


def _unit(vector: list[float]) -> np.ndarray:
    import numpy as np  # with the first vector, not the server's start (numpy's 12 MiB)

    array = np.asarray(vector, dtype="<f4")
    norm = float(np.linalg.norm(array))
    return (array / norm if norm > 0 else array).astype("<f4")


def unit(vector: list[float]) -> list[float]:
    """A vector scaled to unit length in float32 (a zero vector stays zero)."""
    scaled: list[float] = _unit(vector).tolist()
    return scaled


def unit_bytes(vector: list[float]) -> bytes:
    """A vector scaled to unit length, as little-endian float32 bytes (a zero vector stays zero)."""
    return _unit(vector).tobytes()


async def embed_chunks(models: ModelRouter, store: VectorStoreRecord, chunks: list[ChunkRecord]) -> list[ChunkRecord]:
    """The chunks with their embeddings.

    Raises:
        UpstreamError: the model answered vectors of another dimension than the store's (or too few).
    """
    embedded: list[ChunkRecord] = []
    for start in range(0, len(chunks), BATCH):
        batch = chunks[start : start + BATCH]
        vectors = await models.embed(store.embedding_model, [chunk.text for chunk in batch])
        if len(vectors) != len(batch):
            raise UpstreamError(f"embedding model {store.embedding_model} answered {len(vectors)} of {len(batch)}")
        for chunk, vector in zip(batch, vectors, strict=True):
            if len(vector) != store.embedding_dimension:
                raise UpstreamError(
                    f"embedding model {store.embedding_model} answered {len(vector)} dimensions, "
                    f"the store has {store.embedding_dimension}"
                )
            embedded.append(replace(chunk, embedding=unit_bytes(vector)))
    return embedded
