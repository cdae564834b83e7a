"""What a vector store's chunks became since a version: the feed that keeps in-process indexes current.

Backends without a search index of their own for a mode (SQLite and Redis for
vectors, every backend for keywords) search an index held in process. Such an
index is brought up to date from this feed, never rebuilt for a write: each
write of a store's chunks moves the store's ``version`` forward, stamps the
chunks it adds with the new version, and records what it removes with it too.

An index that holds the store as of version ``v`` asks for the changes since
``v`` and applies them in this order:

1. every :class:`ChunkRemoval`: the chunks it names that the index holds at a
   version *below* the removal's are dropped;
2. every :class:`ChunkEntry` of ``added``: it replaces the chunk of the same id,
   if the index holds one.

A backend keeps only recent removals. When ``since`` is older than what it
kept (or is None), the answer is ``complete``: ``added`` is the whole store and
the index starts again from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ChunkEntry:
    """A chunk as an in-process index needs it."""

    chunk_id: str
    file_id: str
    version: int
    """The store's version that wrote it."""
    text: str
    """Empty unless texts were asked for."""
    embedding: bytes
    """Unit-length float32 little-endian; empty unless embeddings were asked for."""


@dataclass(frozen=True, slots=True)
class ChunkRemoval:
    """Chunks removed by the write that moved the store to ``version``: a whole file's, or one chunk."""

    version: int
    file_id: str
    """Every chunk of this file written before ``version`` (when ``chunk_id`` is None)."""
    chunk_id: str | None = None
    """Only this chunk, when given."""


@dataclass(frozen=True, slots=True)
class ChunkChanges:
    """What changed in one store since a version."""

    version: int
    """The store's version these changes bring an index to."""
    complete: bool
    """``added`` is the whole store: the index drops what it held first."""
    added: list[ChunkEntry]
    removed: list[ChunkRemoval]


class ChunkFeed(Protocol):
    """The backend side: one read, in one round trip."""

    async def chunk_changes(
        self, vector_store_id: str, since: int | None, *, texts: bool, embeddings: bool
    ) -> ChunkChanges | None:
        """The changes to a store's chunks after version ``since`` (None: all of them).

        Args:
            vector_store_id: The store.
            since: The version the caller's index holds, or None for a complete answer.
            texts: Whether the added chunks carry their text.
            embeddings: Whether the added chunks carry their embedding.

        Returns:
            The changes (empty lists when ``since`` is the current version), or None when there is no such store.
        """
        ...
