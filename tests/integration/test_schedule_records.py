"""Schedules and their runs on every kernel (the reference, SQLite, PostgreSQL, Redis): a due schedule goes to one
claimer among two kernels over one database, a pause stops a claimed tick, and deleting one deletes its runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kernel_backends import BACKENDS, TWINS

from ferryman.api.schedules import Schedule, ScheduleRun
from ferryman.errors import ConflictError
from ferryman.storage.domain.kinds import SCHEMA
from ferryman.storage.domain.schedules import ScheduleRecords, run_id
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import Owner, principal_term
from ferryman.storage.kernel.protocol import Kernel

pytestmark = pytest.mark.anyio

ALICE = Owner("subject", "alice")
TICK = 1_750_000_020


def schedule(schedule_id: str, tick: int | None = TICK) -> Schedule:
    return Schedule(id=schedule_id, created_at=TICK - 600, agent_id="a1", cron="* * * * *", timezone="UTC",
                    message="hi", next_run_at=tick, paused=tick is None)  # fmt: skip


def run(schedule_id: str, tick: int = TICK) -> ScheduleRun:
    return ScheduleRun(id=run_id(schedule_id, tick), schedule_id=schedule_id, scheduled_at=tick, created_at=tick)


@pytest.fixture(params=list(BACKENDS))
async def kernels(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Kernel, Kernel]]:
    """Two kernels over one database where the backend can open a second, else the one twice."""
    async with BACKENDS[request.param](tmp_path, SCHEMA) as kernel:
        if request.param not in TWINS:
            yield kernel, kernel
            return
        async with TWINS[request.param](kernel, SCHEMA) as twin:
            yield kernel, twin


async def test_a_due_schedule_goes_to_one_claimer_and_moves_on(kernels: tuple[Kernel, Kernel]) -> None:
    one, other = ScheduleRecords(kernels[0]), ScheduleRecords(kernels[1])
    await one.kernel.write([one.put(schedule("s1"), ALICE), one.put(schedule("s2", TICK + 60), ALICE)])
    assert await one.claim_due(TICK, TICK + 60, 10) == []  # its tick is not past yet
    claims = await asyncio.gather(*(records.claim_due(TICK + 1, TICK + 61, 10) for records in (one, other)))
    claimed = [item for found in claims for item in found]
    assert [item.value.id for item in claimed] == ["s1"] and claimed[0].value.next_run_at == TICK
    assert claimed[0].rec.owner == ALICE
    await one.advance(claimed[0], run("s1"), TICK + 60)
    assert await other.claim_due(TICK + 30, TICK + 90, 10) == []
    (stored,) = (await one.schedules.page(allow=Terms(frozenset({principal_term(ALICE.key)})), limit=1)).items
    assert (stored.next_run_at, stored.last_run_at) == (TICK + 60, TICK)
    (made,) = (await one.runs.page(parent="s1")).items
    assert made == run("s1")
    assert await one.update_run(made.id, {"status": "completed", "turn_id": "t1"}) is True
    assert (await one.runs.get(made.id)).status == "completed"


async def test_a_paused_schedule_is_never_claimed_and_a_pause_stops_a_claimed_tick(
    kernels: tuple[Kernel, Kernel],
) -> None:
    records = ScheduleRecords(kernels[0])
    await records.kernel.write([records.put(schedule("s1", None), ALICE), records.put(schedule("s2"), ALICE)])
    (claimed,) = await records.claim_due(TICK + 1, TICK + 61, 10)
    await records.kernel.write([records.pause("s2")])
    with pytest.raises(ConflictError):
        await records.advance(claimed, run("s2"), TICK + 60)
    assert (await records.runs.page(parent="s2")).items == []
    assert await records.claim_due(TICK + 10_000, TICK + 10_060, 10) == []
    assert (await records.schedules.get("s2")).paused is True
    await records.kernel.write([records.resume("s2", TICK + 120)])
    (again,) = await records.claim_due(TICK + 121, TICK + 181, 10)
    assert again.value.next_run_at == TICK + 120


async def test_a_claim_left_by_a_stopped_replica_is_taken_again_once_it_ends(kernels: tuple[Kernel, Kernel]) -> None:
    one, other = ScheduleRecords(kernels[0]), ScheduleRecords(kernels[1])
    await one.kernel.write([one.put(schedule("s1"), ALICE)])
    assert len(await one.claim_due(TICK + 1, TICK + 61, 10)) == 1  # and then stops before its batch
    assert await other.claim_due(TICK + 30, TICK + 90, 10) == []
    (taken,) = await other.claim_due(TICK + 62, TICK + 122, 10)
    assert taken.value.next_run_at == TICK  # the tick that was never run


async def test_runs_are_pruned_to_the_newest_and_go_with_their_schedule(kernels: tuple[Kernel, Kernel]) -> None:
    records = ScheduleRecords(kernels[0])
    await records.kernel.write([records.put(schedule("s1"), ALICE)])
    await records.kernel.write([records.runs.put(run("s1", TICK + 60 * n), parent="s1") for n in range(5)])
    assert await records.prune_runs("s1", 2) == 3
    kept = (await records.runs.page(parent="s1", desc=True)).items
    assert [r.scheduled_at for r in kept] == [TICK + 240, TICK + 180]
    assert await records.schedules.delete("s1") is True
    assert await records.runs.find(kept[0].id) is None


async def test_a_stale_claimer_cannot_fire_a_tick_another_claimed_even_once_its_run_is_pruned(
    kernels: tuple[Kernel, Kernel],
) -> None:
    one, other = ScheduleRecords(kernels[0]), ScheduleRecords(kernels[1])
    await one.kernel.write([one.put(schedule("s1"), ALICE)])
    (stale,) = await one.claim_due(TICK + 1, TICK + 61, 10)  # and then stalls past its claim
    (taken,) = await other.claim_due(TICK + 62, TICK + 122, 10)
    await other.advance(taken, run("s1"), TICK + 60)
    assert await other.prune_runs("s1", 0) == 1
    with pytest.raises(ConflictError):
        await one.advance(stale, run("s1"), TICK + 60)
    assert await one.release(stale, TICK) is False
    assert (await one.runs.page(parent="s1")).items == []
    stored = await one.schedules.get("s1")
    assert (stored.next_run_at, stored.last_run_at) == (TICK + 60, TICK)
    (due,) = await one.claim_due(TICK + 61, TICK + 121, 10)  # advanced: active again, due at its next tick
    assert due.value.next_run_at == TICK + 60


async def test_a_resume_changes_only_a_paused_schedule(kernels: tuple[Kernel, Kernel]) -> None:
    records = ScheduleRecords(kernels[0])
    await records.kernel.write([records.put(schedule("s1"), ALICE)])
    assert await records.kernel.write([records.resume("s1", TICK + 600)]) == [False]
    assert (await records.schedules.get("s1")).next_run_at == TICK
