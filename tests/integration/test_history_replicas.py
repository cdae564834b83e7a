"""A replica keeps each session's history and reads only the turns added since; what another replica changed
otherwise (a turn deleted, an older turn completed after a newer one, the session deleted) it reads again
(``history_cache.py``).

Each test runs on every backend, with a second store over the same database standing for another replica; the
last, on PostgreSQL, checks that the epoch's bump takes the session's row before the turn's, as a start does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from storage_backends import BACKENDS, POSTGRES_URL, twin_store
from store_records import (
    answered,
    complete,
    lease,
    new_agent,
    new_session,
    pause,
    start,
    texts,
    turn_of,
    user,
)

from ferryman.ids import new_id
from ferryman.storage.base import SessionRecord, Store

pytestmark = pytest.mark.anyio


@pytest.fixture(params=list(BACKENDS))
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Store, Store]]:
    async with BACKENDS[request.param](tmp_path) as store, twin_store(store) as other:
        yield store, other


async def _history(store: Store, session: SessionRecord) -> list[str]:
    """What a new turn of the session would continue, as ``store`` reads it."""
    return texts(await store.load_history(session.session_id, new_id()))


async def _session_of_two_turns(store: Store) -> tuple[SessionRecord, list[str]]:
    session = await new_session(store, (await new_agent(store)).agent_id)
    turn_ids = []
    for n in (1, 2):
        turn = await start(store, session, f"q{n}")
        await complete(store, turn, f"a{n}")
        turn_ids.append(turn.turn_id)
    return session, turn_ids


async def test_turns_another_replica_completes_extend_the_history_kept(pair: tuple[Store, Store]) -> None:
    store, other = pair
    session, _ = await _session_of_two_turns(store)
    assert await _history(store, session) == ["user:q1", "assistant:a1", "user:q2", "assistant:a2"]
    third = await start(other, session, "q3")
    await complete(other, third, "a3")
    fourth = await store.start_turn(turn_of(session, "q4"), [user("q4")])
    assert texts(fourth) == ["user:q1", "assistant:a1", "user:q2", "assistant:a2", "user:q3", "assistant:a3", "user:q4"]


async def test_a_turn_another_replica_deleted_leaves_the_history_kept(pair: tuple[Store, Store]) -> None:
    store, other = pair
    session, (first, _) = await _session_of_two_turns(store)
    assert await _history(store, session) == ["user:q1", "assistant:a1", "user:q2", "assistant:a2"]
    await other.delete_turn(session.session_id, first)
    assert await _history(store, session) == ["user:q2", "assistant:a2"]
    third = await start(store, session, "q3")
    assert texts(await store.load_history(session.session_id, third.turn_id)) == ["user:q2", "assistant:a2", "user:q3"]


async def test_an_older_turn_another_replica_completes_late_takes_its_place(pair: tuple[Store, Store]) -> None:
    store, other = pair
    session = await new_session(store, (await new_agent(store)).agent_id)
    paused = await start(store, session, "a?")
    waiting = await pause(store, paused, "calling for a")
    newer = await start(store, session, "b?")
    await complete(store, newer, "b!")
    assert await _history(store, session) == ["user:b?", "assistant:b!"]
    resumed = (await other.claim_resume(session.session_id, paused.turn_id, lease())).record
    await other.save_step(resumed.turn_id, answered(waiting, "sunny"), resumed.infer_iters)
    await complete(other, resumed, "a!")
    assert await _history(store, session) == [
        "user:a?",
        "assistant:calling for a",
        "tool:sunny",
        "assistant:a!",
        "user:b?",
        "assistant:b!",
    ]


async def test_a_session_another_replica_deleted_has_no_history(pair: tuple[Store, Store]) -> None:
    store, other = pair
    session, _ = await _session_of_two_turns(store)
    assert await _history(store, session) == ["user:q1", "assistant:a1", "user:q2", "assistant:a2"]
    await other.delete_session(session.agent_id or "", session.session_id)
    assert await _history(store, session) == []


@pytest.fixture
async def postgres(tmp_path: Path) -> AsyncIterator[Store]:
    async with BACKENDS["postgres"](tmp_path) as store:
        yield store


async def _waiting_on_a_lock(conn: Any) -> None:
    """Return once another connection of the database waits on a lock (PostgreSQL tells no event of it: polled)."""
    async with asyncio.timeout(5.0):
        while not await conn.fetchval(  # noqa: ASYNC110  (no event to wait on)
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        ):
            await asyncio.sleep(0.01)


async def test_an_older_turn_completing_while_a_turn_starts_is_stored_completed(postgres: Store) -> None:
    """A start holds the session's row and waits on nothing of the turn; the finish waits its turn, no deadlock."""
    import asyncpg

    store = postgres
    session = await new_session(store, (await new_agent(store)).agent_id)
    older = await start(store, session, "a?")
    await pause(store, older, "calling")
    newer = await start(store, session, "b?")
    await complete(store, newer, "b!")
    await store.claim_resume(session.session_id, older.turn_id, lease())
    db: Any = store._db  # type: ignore[attr-defined]
    starter = await asyncpg.connect(POSTGRES_URL, server_settings={"search_path": db._schema})
    watcher = await asyncpg.connect(POSTGRES_URL)
    try:
        starting = starter.transaction()
        await starting.start()
        # What a start does first: the session's row, held to its end.
        await starter.execute("SELECT history_epoch FROM sessions WHERE session_id = $1 FOR UPDATE", session.session_id)
        finishing = asyncio.create_task(complete(store, older, "a!"))
        await _waiting_on_a_lock(watcher)  # the finish waits on the session's row
        record = turn_of(session, "c?")
        inserted = starter.execute(
            "INSERT INTO turns (turn_id, session_id, agent_id, status, input_messages, overrides, started_at, "
            "lease_until) VALUES ($1, $2, $3, 'in_progress', '[]', '{}', $4, $5)",
            record.turn_id,
            session.session_id,
            session.agent_id,
            db.dialect.stamp(record.started_at),
            db.dialect.epoch(record.lease_until),
        )
        finished, started = await asyncio.gather(finishing, asyncio.wait_for(inserted, 5.0), return_exceptions=True)
        await starting.rollback()
        assert not isinstance(finished, BaseException), finished
        # The older turn still ran when the start inserted: refused (a 409), never a deadlock.
        assert isinstance(started, asyncpg.UniqueViolationError), started
        assert (await store.get_turn_record(session.session_id, older.turn_id)).status == "completed"
    finally:
        await starter.close()
        await watcher.close()
