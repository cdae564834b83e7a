"""Reads of one record that every backend answers from its read of many: written once, above the backends.

A backend implements the batch read (``responses_by_id``,
``vector_store_files``) and the page (``list_vector_store_files``); the single
reads, and the whole list, that the services also call derive from them here, so
that no backend writes them again. Each is still one trip.
"""

from __future__ import annotations

from typing import Protocol

from ferryman.errors import NotFoundError
from ferryman.storage.base import ResponseRecord
from ferryman.storage.kernel.ops import MAX_COUNT
from ferryman.storage.knowledge import VectorStoreFileRecord, VectorStoreStore


class BatchReads(Protocol):
    """The batch reads a backend implements, from which :class:`DerivedReads` answers."""

    async def responses_by_id(self, response_ids: list[str]) -> list[ResponseRecord]: ...

    async def vector_store_files(self, vector_store_id: str, file_ids: list[str]) -> list[VectorStoreFileRecord]: ...


class DerivedReads:
    """Single reads over a backend's batch reads (a base of each backend's store)."""

    async def get_response(self: BatchReads, response_id: str) -> ResponseRecord:
        """Return a response or raise NotFoundError."""
        found = await self.responses_by_id([response_id])
        if not found:
            raise NotFoundError(f"response '{response_id}' not found")
        return found[0]

    async def get_vector_store_file(self: BatchReads, vector_store_id: str, file_id: str) -> VectorStoreFileRecord:
        """One attachment, or NotFoundError."""
        found = await self.vector_store_files(vector_store_id, [file_id])
        if not found:
            raise NotFoundError(f"file '{file_id}' not found in vector store '{vector_store_id}'")
        return found[0]

    async def all_vector_store_files(self: VectorStoreStore, vector_store_id: str) -> list[VectorStoreFileRecord]:
        """Every attachment of a store, in its list order (SQL: by creation; Redis: by attachment): one page that
        holds them all."""
        return (await self.list_vector_store_files(vector_store_id, None, MAX_COUNT - 1, "asc")).items
