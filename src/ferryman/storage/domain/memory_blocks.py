"""Agents' memory blocks over the kernel: one record per block, versioned by compare-and-set on its status.

A block's record is ``memory_block`` ``<agent_id>/<label>``, owned by whoever
created it, indexed by ``agent_id``. Its status is its version number as text,
so a change is one :class:`~ferryman.storage.kernel.ops.Patch` that expects the
version it read: two writers that read the same version cannot both win, on
every backend. The body keeps the block's earlier versions, newest first, at
most as many as the caller asks (they are small, and go with the block).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from ferryman.errors import ConflictError
from ferryman.storage.domain.kinds import MEMORY_BLOCK
from ferryman.storage.domain.records import ModelCodec, Records, Stored
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.filters import ALL, Filter
from ferryman.storage.kernel.model import Owner, PageOf, Rec
from ferryman.storage.kernel.protocol import Kernel


class BlockVersion(BaseModel):
    """An earlier version of a block (times in seconds since the epoch)."""

    version: int
    value: str
    description: str | None = None
    updated_at: float


class BlockRecord(BaseModel):
    """A block as stored: its current version and the earlier ones kept, newest first."""

    agent_id: str
    label: str
    value: str
    description: str | None = None
    version: int = 1
    created_at: float
    updated_at: float
    earlier: list[BlockVersion] = Field(default_factory=list)

    def current(self) -> BlockVersion:
        """The block's current version as a version entry."""
        return BlockVersion(
            version=self.version, value=self.value, description=self.description, updated_at=self.updated_at
        )


def block_id(agent_id: str, label: str) -> str:
    """The record id of an agent's block."""
    return f"{agent_id}/{label}"


class MemoryBlocks:
    """The memory blocks of one kernel.

    Args:
        kernel: The backend (the server's store's ``kernel``).
    """

    def __init__(self, kernel: Kernel) -> None:
        self.records: Records[BlockRecord] = Records(
            kernel, MEMORY_BLOCK, ModelCodec(BlockRecord), lambda block: block_id(block.agent_id, block.label)
        )
        self.kernel = kernel

    async def find(self, agent_id: str, label: str, allow: Filter = ALL) -> Stored[BlockRecord] | None:
        """The block, or None when it is missing or ``allow`` excludes it."""
        return await self.records.find(block_id(agent_id, label), allow=allow)

    async def of_agent(self, agent_id: str, allow: Filter = ALL, limit: int | None = None) -> list[BlockRecord]:
        """An agent's blocks ``allow`` admits, in creation order (at most ``limit``)."""
        read = self.of_agent_read(agent_id, allow, limit)
        (found,) = await self.kernel.read([read])
        return self.of_agent_found(found)

    def of_agent_read(self, agent_id: str, allow: Filter = ALL, limit: int | None = None) -> ops.Page:
        """The read :meth:`of_agent` sends, to send with another call; :meth:`of_agent_found` reads its answer."""
        return ops.Page(MEMORY_BLOCK, allow=allow, where=("agent_id", agent_id), limit=limit, parent="")

    def of_agent_found(self, found: PageOf[Rec]) -> list[BlockRecord]:
        """The blocks an :meth:`of_agent_read` found."""
        return [self.records.stored(rec).value for rec in found.items]

    async def create(self, block: BlockRecord, owner: Owner | None) -> None:
        """Store a new block at its version.

        Raises:
            ConflictError: the agent has a block of this label.
        """
        put = ops.Put(MEMORY_BLOCK, block_id(block.agent_id, block.label), self.records.codec.dump(block),
                      owner=owner, status=str(block.version))  # fmt: skip
        try:
            await self.kernel.write([put])
        except ConflictError as exc:
            raise ConflictError(f"memory block '{block.label}' exists") from exc

    async def replace(self, block: BlockRecord, expected: int, before: Sequence[ops.Op] = ()) -> None:
        """Write ``block`` (its version one more than ``expected``) over the block at version ``expected``.

        Raises:
            ConflictError: the block is at another version now.
            NotFoundError: it is missing, or ``before``'s check found it unreadable.
        """
        patch = ops.Patch(
            MEMORY_BLOCK,
            block_id(block.agent_id, block.label),
            merge=self.records.codec.dump(block),
            status=str(block.version),
            expect_status=frozenset({str(expected)}),
        )
        try:
            await self.kernel.write([*before, patch])
        except ConflictError as exc:
            raise ConflictError(
                f"memory block '{block.label}' changed since version {expected}; read it again and retry"
            ) from exc

    async def delete(self, agent_id: str, label: str, before: Sequence[ops.Op] = ()) -> bool:
        """Delete a block; whether it existed."""
        return await self.records.delete(block_id(agent_id, label), before=before)

    async def delete_agent(self, agent_id: str) -> int:
        """Delete every block of an agent; how many there were."""
        blocks = await self.of_agent(agent_id)
        if blocks:
            await self.kernel.write([ops.Delete(MEMORY_BLOCK, block_id(b.agent_id, b.label)) for b in blocks])
        return len(blocks)
