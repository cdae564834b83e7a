"""Memory blocks on every kernel (the reference, SQLite, PostgreSQL and Redis): owned, listed by agent, and
versioned by compare-and-set, so that of two writers that read one version only the first wins."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kernel_backends import BACKENDS

from ferryman.errors import ConflictError, NotFoundError
from ferryman.storage.domain.kinds import SCHEMA
from ferryman.storage.domain.memory_blocks import BlockRecord, MemoryBlocks, block_id
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import Owner, principal_term

pytestmark = pytest.mark.anyio

ALICE = Owner("api_key", "alice")
BOB = Owner("api_key", "bob")


def block(agent_id: str, label: str, value: str = "v1", version: int = 1) -> BlockRecord:
    return BlockRecord(agent_id=agent_id, label=label, value=value, version=version, created_at=1.0, updated_at=1.0)


def mine(owner: Owner) -> Terms:
    return Terms(frozenset({principal_term(owner.key)}))


@pytest.fixture(params=list(BACKENDS))
async def blocks(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryBlocks]:
    async with BACKENDS[request.param](tmp_path, SCHEMA) as kernel:
        yield MemoryBlocks(kernel)


async def test_blocks_are_listed_by_agent_and_owner(blocks: MemoryBlocks) -> None:
    await blocks.create(block("agent-1", "human"), ALICE)
    await blocks.create(block("agent-2", "human"), ALICE)
    await blocks.create(block("agent-1", "persona"), BOB)
    with pytest.raises(ConflictError, match="memory block 'human' exists"):
        await blocks.create(block("agent-1", "human", "again"), ALICE)
    assert [b.label for b in await blocks.of_agent("agent-1")] == ["human", "persona"]
    assert [b.label for b in await blocks.of_agent("agent-1", mine(ALICE))] == ["human"]
    found = await blocks.find("agent-1", "persona")
    assert found is not None and found.rec.owner == BOB and found.rec.status == "1"
    assert await blocks.find("agent-1", "persona", mine(ALICE)) is None


async def test_a_write_over_a_stale_version_is_refused(blocks: MemoryBlocks) -> None:
    await blocks.create(block("agent-1", "human"), ALICE)
    second = block("agent-1", "human", "v2", version=2).model_copy(update={"earlier": [block("a", "h").current()]})
    await blocks.replace(second, expected=1)
    with pytest.raises(ConflictError, match="changed since version 1"):
        await blocks.replace(block("agent-1", "human", "lost", version=2), expected=1)
    found = await blocks.find("agent-1", "human")
    assert found is not None and found.value == second and found.rec.owner == ALICE
    with pytest.raises(NotFoundError):
        await blocks.replace(block("agent-1", "nobody", version=2), expected=1)


async def test_of_two_writers_of_one_version_one_wins(blocks: MemoryBlocks) -> None:
    await blocks.create(block("agent-1", "human"), ALICE)
    outcomes = await asyncio.gather(
        *(blocks.replace(block("agent-1", "human", f"writer {n}", version=2), expected=1) for n in range(2)),
        return_exceptions=True,
    )
    assert sorted(type(outcome).__name__ for outcome in outcomes) == ["ConflictError", "NoneType"]


async def test_a_guarded_write_the_reader_may_not_see_is_missing_and_the_agents_blocks_go_together(
    blocks: MemoryBlocks,
) -> None:
    await blocks.create(block("agent-1", "human"), ALICE)
    await blocks.create(block("agent-1", "persona"), ALICE)
    await blocks.create(block("agent-2", "human"), ALICE)
    guard = ops.Check(blocks.records.kind, block_id("agent-1", "human"), read=mine(BOB))
    with pytest.raises(NotFoundError):
        await blocks.replace(block("agent-1", "human", "bob's", version=2), expected=1, before=(guard,))
    assert await blocks.delete_agent("agent-1") == 2
    assert await blocks.of_agent("agent-1") == []
    assert [b.agent_id for b in await blocks.of_agent("agent-2")] == ["agent-2"]
    assert await blocks.delete("agent-2", "human") and not await blocks.delete("agent-2", "human")
