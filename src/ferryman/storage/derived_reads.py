"""Reads that every backend answers from its broader reads: written once, above the backends.

A backend implements the batch reads (``responses_by_id``,
``vector_store_files``, ``list_turns``, ``store_files``) and the page
(``list_vector_store_files``); the single reads, the whole list and the counts
that the services also call derive from them here, so that no backend writes them
again. Each is one trip, but a step not yet completed (two: its turn, then its
pending step) and a missing one (three: the turn is read again).
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from ferryman.api.agents import Step, Turn
from ferryman.errors import NotFoundError
from ferryman.storage.base import ResponseRecord, TurnStore
from ferryman.storage.kernel.ops import MAX_COUNT
from ferryman.storage.knowledge import FileCounts, VectorStoreFileRecord, VectorStoreStore


class BatchReads(Protocol):
    """The batch reads a backend implements, from which :class:`DerivedReads` answers."""

    async def responses_by_id(self, response_ids: list[str]) -> list[ResponseRecord]: ...

    async def vector_store_files(self, vector_store_id: str, file_ids: list[str]) -> list[VectorStoreFileRecord]: ...


class DerivedReads:
    """Single reads and counts over a backend's broader reads (a base of each backend's store)."""

    async def get_step(self: TurnStore, session_id: str, turn_id: str, step_id: str) -> Step:
        """One completed or pending step of a session's turn, or NotFoundError.

        One read for a completed step. A pending step is left out of its turn until it completes, under the same
        id, and never goes back: so a step found in neither read may have completed between them, and the turn is
        read once more before it is reported missing.
        """
        turns = await self.list_turns([session_id], [turn_id])
        found = _step_of(turns, step_id)
        if turns and found is None:  # of this session: its pending step may be the one
            pending = await self.pending_step(turn_id)
            if pending is not None and pending.step_id == step_id:
                return pending
            found = _step_of(await self.list_turns([session_id], [turn_id]), step_id)
        if found is None:
            raise NotFoundError(f"step '{step_id}' of turn '{turn_id}' not found")
        return found

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

    async def file_counts(self: VectorStoreStore, vector_store_id: str, batch_id: str | None = None) -> FileCounts:
        """A store's files (or one batch's: its files, at most a request's, read whole) by status."""
        if batch_id is None:
            return (await self.store_files([vector_store_id]))[vector_store_id].counts
        listed = await self.list_vector_store_files(vector_store_id, None, MAX_COUNT - 1, "asc", batch_id=batch_id)
        statuses: Counter[str] = Counter(attachment.status for attachment in listed.items)
        return FileCounts(**statuses)


def _step_of(turns: list[Turn], step_id: str) -> Step | None:
    """The completed step of that id among these turns' (None: none)."""
    return next((step for turn in turns for step in turn.steps if step.step_id == step_id), None)
