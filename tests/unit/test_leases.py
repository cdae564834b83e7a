"""Turn leases: the running replica renews its turns; every replica fails the turns whose lease ran out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from ferryman.api.agents import Agent, AgentConfig
from ferryman.api.content import UserMessage
from ferryman.engine.channel import LiveRun, StopReason, TurnRunner
from ferryman.errors import FailureCode
from ferryman.ids import new_id, utcnow
from ferryman.services.leases import ABANDONED, LEASE_LOST, TurnLeases
from ferryman.storage.base import ExpiredTurn, SessionRecord, TurnRecord
from ferryman.storage.domain.agents import agents
from ferryman.storage.sql.sqlite import SqliteStore

pytestmark = pytest.mark.anyio


@pytest.fixture()
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(str(tmp_path / "leases.db"))
    await opened.open()
    yield opened
    await opened.close()


async def _running_turn(store: SqliteStore, lease_seconds: float) -> TurnRecord:
    agent = Agent(agent_id=new_id(), agent_config=AgentConfig(model="m", instructions="i"), created_at=utcnow())
    await agents(store.kernel).create(agent)
    session = SessionRecord(new_id(), agent.agent_id, "s", utcnow())
    await store.create_session(session)
    record = TurnRecord(
        turn_id=new_id(),
        session_id=session.session_id,
        agent_id=agent.agent_id,
        status="in_progress",
        input_messages=[UserMessage(content="q")],
        started_at=utcnow(),
        lease_until=utcnow() + timedelta(seconds=lease_seconds),
    )
    await store.start_turn(record, [UserMessage(content="q")])
    return record


async def test_a_beat_renews_this_replicas_turns_and_fails_the_abandoned_ones(store: SqliteStore) -> None:
    runner = TurnRunner()
    leases = TurnLeases(store, runner, seconds=30)
    mine = await _running_turn(store, lease_seconds=-1)  # already expired: only the renewal saves it
    abandoned = await _running_turn(store, lease_seconds=-1)
    release = asyncio.Event()

    async def hold(_: LiveRun[None]) -> None:
        await release.wait()

    task = runner.start(mine.turn_id, hold).task
    try:
        assert await leases.beat_once() == [ExpiredTurn(abandoned.turn_id)]
    finally:
        release.set()
        await task
    failed = await store.get_turn_record(abandoned.session_id, abandoned.turn_id)
    assert failed.status == "failed"
    assert failed.error is not None and (failed.error.code, failed.error.message) == ("interrupted", ABANDONED)
    assert (await store.get_turn_record(mine.session_id, mine.turn_id)).status == "in_progress"
    # Once this replica stops running it, nobody renews it: 30 s later it counts as abandoned.
    assert await store.fail_expired_turns(utcnow() + timedelta(seconds=31), "gone") == [ExpiredTurn(mine.turn_id)]


async def test_a_new_lease_lasts_the_configured_time() -> None:
    leases = TurnLeases(SqliteStore(":memory:"), TurnRunner(), seconds=12)
    before = utcnow()
    until = leases.until()
    assert timedelta(seconds=12) <= until - before < timedelta(seconds=13)
    assert leases.beat == 4


async def test_a_turn_failed_elsewhere_while_this_replica_stalled_is_cancelled_here(store: SqliteStore) -> None:
    runner = TurnRunner()
    leases = TurnLeases(store, runner, seconds=30)
    stalled = await _running_turn(store, lease_seconds=30)
    cancelled = asyncio.Event()

    async def hold(_: LiveRun[None]) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError as exc:
            assert exc.args == (StopReason(FailureCode.CANCELLED, LEASE_LOST),)
            cancelled.set()
            raise

    task = runner.start(stalled.turn_id, hold).task
    # Another replica saw the lease run out (as if this one had stalled for a minute).
    assert await store.fail_expired_turns(utcnow() + timedelta(seconds=60), ABANDONED) == [ExpiredTurn(stalled.turn_id)]
    await leases.beat_once()  # not yet: a turn that just finished looks the same for a moment
    assert not task.done()
    await leases.beat_once()
    assert cancelled.is_set() and task.cancelled()
    assert runner.running() == []


async def test_a_sole_process_fails_at_start_what_it_left_running_whatever_the_lease(store: SqliteStore) -> None:
    left = await _running_turn(store, lease_seconds=300)
    shared = TurnLeases(store, TurnRunner(), seconds=30)
    await shared.start()
    await shared.stop()
    assert (await store.get_turn_record(left.session_id, left.turn_id)).status == "in_progress"
    sole = TurnLeases(store, TurnRunner(), seconds=30, sole_process=True)
    await sole.start()
    await sole.stop()
    assert (await store.get_turn_record(left.session_id, left.turn_id)).status == "failed"
