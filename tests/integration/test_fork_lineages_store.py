"""Forks' lineages on every kernel (the reference, SQLite, PostgreSQL and Redis): owned, listed by source, read
many at once, and changed by compare-and-set on their version, so that two concurrent changes both land."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from kernel_backends import BACKENDS

from ferryman.errors import ConflictError
from ferryman.storage.domain.forks import Lineage, Lineages
from ferryman.storage.domain.kinds import SCHEMA
from ferryman.storage.kernel.model import Owner

pytestmark = pytest.mark.anyio

ALICE = Owner("api_key", "alice")


@pytest.fixture(params=list(BACKENDS))
async def lineages(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Lineages]:
    async with BACKENDS[request.param](tmp_path, SCHEMA) as kernel:
        yield Lineages(kernel)


async def test_lineages_are_listed_by_source_and_read_many_at_once(lineages: Lineages) -> None:
    await lineages.create(Lineage(id="f1", of="session", source="s", through="t1", agent_id="a"), ALICE)
    await lineages.create(Lineage(id="f2", of="session", source="f1", through="t1"), ALICE)
    await lineages.create(Lineage(id="f3", of="session", source="s", through="t2"), None)
    with pytest.raises(ConflictError):
        await lineages.create(Lineage(id="f1", of="session", source="x", through="y"), ALICE)
    assert [lineage.id for lineage in await lineages.of_source("s")] == ["f1", "f3"]
    assert sorted(await lineages.many(["f1", "f2", "nope"])) == ["f1", "f2"]
    found = await lineages.records.find("f1")
    assert found is not None and found.rec.owner == ALICE and found.value.agent_id == "a"
    assert await lineages.find("nope") is None
    assert await lineages.delete("f1") and not await lineages.delete("f1")
    assert [lineage.id for lineage in await lineages.of_source("s")] == ["f3"]


async def test_concurrent_changes_of_one_lineage_all_land(lineages: Lineages) -> None:
    await lineages.create(Lineage(id="c", of="conversation", source="conv_a", through="i9"), ALICE)

    def hiding(item: str) -> Callable[[Lineage], Lineage]:
        return lambda kept: kept.model_copy(update={"hidden": [*kept.hidden, item]})

    await asyncio.gather(*(lineages.change("c", hiding(f"i{n}")) for n in range(4)))
    found = await lineages.records.find("c")
    assert found is not None and sorted(found.value.hidden) == ["i0", "i1", "i2", "i3"]
    assert found.rec.status == "5", "each change is one version"
    assert await lineages.change("nope", hiding("x")) is None
