"""A schedule fires once per tick across two replicas: two whole service stacks (each its own store, agents and
scheduler) over one SQLite file or one PostgreSQL schema, reading one clock the test moves, look at once.

Exactly one run is made and exactly one turn reaches the scripted model (which fails the test at teardown if a
call finds nothing scripted). A replica that claimed a tick and stalled past ``schedules.claim_seconds`` loses it
to the other, and can no longer fire it when it wakes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx
import pytest
from storage_backends import POSTGRES_URL, postgres_store

from ferryman.errors import ConflictError
from ferryman.schedule_settings import ScheduleSettings
from ferryman.server.app import Services, build_services
from ferryman.storage.base import Store
from ferryman.storage.domain.schedules import run_id
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel
from inprocess import migrated_sqlite, serving

pytestmark = pytest.mark.anyio

START = 1_750_000_000.0
"""The clock's start: 15:06:40 UTC, so the hourly schedule's first tick is 16:00."""
FIRST_TICK = 1_750_003_200
SETTINGS = ScheduleSettings(fire=False, claim_seconds=60)


class Clock:
    """The time both replicas read, moved by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def _stores(backend: str, tmp_path: Path) -> AsyncIterator[tuple[Store, Store]]:
    """Two stores over one database, as two replicas open them."""
    if backend == "sqlite":
        path = migrated_sqlite(tmp_path / "ferryman.db")
        yield SqliteStore(path), SqliteStore(path)
        return
    from ferryman.storage.sql.postgres import PostgresStore

    async with postgres_store(tmp_path) as migrated:
        schema = migrated._db._schema  # type: ignore[attr-defined]
        yield PostgresStore(POSTGRES_URL, schema=schema), PostgresStore(POSTGRES_URL, schema=schema)


Replica = tuple[Services, httpx.AsyncClient]


@pytest.fixture(params=["sqlite", "postgres"])
async def replicas(
    request: pytest.FixtureRequest, tmp_path: Path, scripted: ScriptedModel
) -> AsyncIterator[tuple[Clock, Replica, Replica]]:
    clock = Clock(START)
    async with AsyncExitStack() as stack:
        stores = await stack.enter_async_context(_stores(request.param, tmp_path))
        started: list[Replica] = []
        for store in stores:
            services = build_services(store, [scripted], schedules=SETTINGS, clock=clock)
            started.append((services, await stack.enter_async_context(serving(services))))
        yield clock, started[0], started[1]


async def _hourly_schedule(http: httpx.AsyncClient) -> tuple[str, str]:
    body = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}
    made = await http.post("/v1/agents", json=body)
    assert made.status_code == 200, made.text
    agent_id = str(made.json()["agent_id"])
    made = await http.post("/v1/schedules", json={"agent_id": agent_id, "cron": "@hourly", "message": "tick?"})
    assert made.status_code == 200, made.text
    assert made.json()["next_run_at"] == FIRST_TICK
    return agent_id, str(made.json()["id"])


async def _turns(http: httpx.AsyncClient, agent_id: str) -> list[str]:
    """Every turn of every session of the agent."""
    sessions = (await http.get(f"/v1/agents/{agent_id}/sessions")).json()["data"]
    return [turn["turn_id"] for session in sessions for turn in session["turns"]]


async def test_two_replicas_looking_at_once_fire_a_tick_once(
    replicas: tuple[Clock, Replica, Replica], scripted: ScriptedModel
) -> None:
    clock, (one, http), (other, _) = replicas
    agent_id, schedule_id = await _hourly_schedule(http)
    clock.now = FIRST_TICK + 1
    scripted.enqueue_text("tock")
    made = await asyncio.gather(one.scheduler.fire_due(), other.scheduler.fire_due())
    await asyncio.gather(one.scheduler.settled(), other.scheduler.settled())
    runs = [run for found in made for run in found]
    assert [run.scheduled_at for run in runs] == [FIRST_TICK]
    assert len(scripted.requests) == 1
    listed = (await http.get(f"/v1/schedules/{schedule_id}/runs")).json()["data"]
    assert [(r["id"], r["status"], r["turn_id"]) for r in listed] == [(runs[0].id, "completed", runs[0].turn_id)]
    assert await _turns(http, agent_id) == [runs[0].turn_id]
    again = await asyncio.gather(one.scheduler.fire_due(), other.scheduler.fire_due())
    assert again == [[], []]  # the next tick is an hour away


async def test_a_replica_stalled_past_its_claim_loses_the_tick_to_the_other(
    replicas: tuple[Clock, Replica, Replica], scripted: ScriptedModel
) -> None:
    clock, (one, http), (other, _) = replicas
    agent_id, schedule_id = await _hourly_schedule(http)
    clock.now = FIRST_TICK + 1
    records = one.schedules.records
    (stalled,) = await records.claim_due(clock.now, clock.now + SETTINGS.claim_seconds, 10)  # then it stalls
    assert await other.scheduler.fire_due() == []  # the claim holds it
    clock.now += SETTINGS.claim_seconds + 1
    scripted.enqueue_text("tock")
    (run,) = await other.scheduler.fire_due()
    await other.scheduler.settled()
    assert run.scheduled_at == FIRST_TICK and run.status == "in_progress" and run.turn_id is not None

    # The stalled replica wakes: the tick is no longer its to fire, even with that tick's run gone.
    await records.runs.delete(run_id(schedule_id, FIRST_TICK))
    with pytest.raises(ConflictError):
        await records.advance(stalled, run.model_copy(update={"created_at": int(clock.now)}), FIRST_TICK + 3600)
    assert await records.release(stalled, FIRST_TICK) is False
    assert await one.scheduler.fire_due() == []
    assert len(scripted.requests) == 1
    assert await _turns(http, agent_id) == [run.turn_id]
    stored = (await http.get(f"/v1/schedules/{schedule_id}")).json()
    assert (stored["last_run_at"], stored["next_run_at"]) == (FIRST_TICK, FIRST_TICK + 3600)
