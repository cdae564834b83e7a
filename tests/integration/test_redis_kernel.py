"""What the Redis kernel promises beyond the contract suite: filtered pages read from the term index, key layout.

The contract suite (``test_kernel_contract.py``) checks the results; these tests watch which record hashes a
page's script reads (Redis's MONITOR shows the commands scripts run) to check a filtered page costs O(page).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import pytest
from kernel_backends import redis_kernel
from storage_backends import REDIS_URL

from ferryman.redis_url import connect
from ferryman.storage.kernel.filters import Filter, IdIn, Not, Or, Terms
from ferryman.storage.kernel.model import Kind, Owner, Schema
from ferryman.storage.kernel.ops import Page, Put
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.storage.redis.keys import check_names, pattern

pytestmark = pytest.mark.anyio

AGENT = Kind("agent")
SESSION = Kind("session", parents=("agent",))
SCHEMA = Schema([AGENT, SESSION])
ALICE = Owner("api_key", "alice", {"teams": ("red",)})
BOB = Owner("api_key", "bob")
OTHERS = 300
ALICES = range(0, OTHERS, 100)
"""Alice owns every hundredth record; Bob the rest."""


@pytest.fixture()
async def kernel(tmp_path: Path) -> AsyncIterator[RedisKernel]:
    async with redis_kernel(tmp_path, SCHEMA) as opened:
        yield cast(RedisKernel, opened)


async def records_read(kernel: RedisKernel, page: Page) -> tuple[list[str], int]:
    """The ids ``page`` lists, and how many commands its script ran on record hashes."""
    watcher = connect(REDIS_URL, max_connections=1)
    try:
        async with watcher.monitor() as monitor:
            [found] = await kernel.read([page])
            sentinel = f"{kernel.prefix}sentinel"
            await kernel.client.get(sentinel)
            touched = 0
            while True:
                command = str((await monitor.next_command())["command"])
                if sentinel in command:
                    break
                touched += f"{kernel.prefix}r:" in command
    finally:
        await watcher.aclose()
    return [rec.id for rec in found.items], touched


async def populate(kernel: Kernel) -> None:
    await kernel.write([Put(AGENT, "a", {}, owner=BOB)])
    puts = [Put(SESSION, f"s{n:03}", {}, parent="a", owner=ALICE if n in ALICES else BOB) for n in range(OTHERS)]
    await kernel.write(puts)


@pytest.mark.parametrize(
    "allow",
    [Terms(frozenset({"p:key:alice"})), Or((Terms(frozenset({"teams:red"})), IdIn(frozenset({"s150"}))))],
    ids=["terms", "terms-or-ids"],
)
@pytest.mark.parametrize("parent", ["a", None])
async def test_a_filtered_page_reads_only_the_records_it_may_list(
    kernel: RedisKernel, allow: Filter, parent: str | None
) -> None:
    await populate(kernel)
    ids, touched = await records_read(kernel, Page(SESSION, parent=parent, allow=allow, limit=2))
    assert ids == ["s000", "s100"]
    assert touched <= 8  # per candidate a check and a read, three candidates (two and has_more), a margin


async def test_a_filter_without_an_index_scans_in_order(kernel: RedisKernel) -> None:
    await populate(kernel)
    ids, touched = await records_read(
        kernel, Page(SESSION, parent="a", allow=Not(Terms(frozenset({"p:key:bob"}))), limit=2)
    )
    assert ids == ["s000", "s100"]
    assert touched > 100  # the watch sees a scan: the cheap cases above are the index, not an idle watch


def test_names_that_could_collide_are_refused() -> None:
    with pytest.raises(ValueError, match="holds ':'"):
        check_names(Schema([Kind("a:b")]))
    with pytest.raises(ValueError, match="holds ':'"):
        check_names(Schema([Kind("turn", logs=("ev:ents",))]))
    assert pattern("a*b[") == "a\\*b\\[*"
