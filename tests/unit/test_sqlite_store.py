"""The SQLite store: paging, ordering, cascades, the one-running-turn rule, migrations."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ferryman.api.agents import Agent, AgentConfig
from ferryman.api.content import UserMessage
from ferryman.engine.ids import new_id, utcnow
from ferryman.errors import ConflictError, NotFoundError
from ferryman.storage.base import ExpiredTurn, SessionRecord, TurnRecord
from ferryman.storage.codec import MessageCache
from ferryman.storage.migrate import migrate_sqlite, migration_scripts
from ferryman.storage.sqlite import SqliteStore
from ferryman.storage.sqlite_conn import SqliteRunner

pytestmark = pytest.mark.anyio


@pytest.fixture()
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture()
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(str(tmp_path / "store.db"))
    await opened.open()
    yield opened
    await opened.close()


async def _agent(store: SqliteStore) -> str:
    agent = Agent(agent_id=new_id(), agent_config=AgentConfig(model="m", instructions="i"), created_at=utcnow())
    await store.create_agent(agent)
    return agent.agent_id


async def _session(store: SqliteStore, agent_id: str) -> str:
    session = SessionRecord(new_id(), agent_id, "s", utcnow())
    await store.create_session(session)
    return session.session_id


def _turn(agent_id: str, session_id: str) -> TurnRecord:
    return TurnRecord(
        turn_id=new_id(),
        session_id=session_id,
        agent_id=agent_id,
        status="in_progress",
        input_messages=[UserMessage(content="hi")],
        started_at=utcnow(),
    )


async def test_pages_come_in_creation_order(store: SqliteStore) -> None:
    ids = [await _agent(store) for _ in range(5)]
    first = await store.list_agents(0, 2)
    assert [a.agent_id for a in first.items] == ids[:2] and first.has_more
    last = await store.list_agents(4, 2)
    assert [a.agent_id for a in last.items] == ids[4:] and not last.has_more
    everything = await store.list_agents(0, None)
    assert [a.agent_id for a in everything.items] == ids and not everything.has_more


async def test_one_running_turn_per_session(store: SqliteStore) -> None:
    agent_id = await _agent(store)
    session_id = await _session(store, agent_id)
    first = _turn(agent_id, session_id)
    await store.start_turn(first, [UserMessage(content="hi")])
    with pytest.raises(ConflictError):
        await store.start_turn(_turn(agent_id, session_id), [])
    first.status, first.completed_at = "completed", utcnow()
    await store.finish_turn(first)
    await store.start_turn(_turn(agent_id, session_id), [])


async def test_deleting_an_agent_cascades(store: SqliteStore, tmp_path: Path) -> None:
    agent_id = await _agent(store)
    session_id = await _session(store, agent_id)
    await store.start_turn(_turn(agent_id, session_id), [UserMessage(content="hi")])
    await store.delete_agent(agent_id)
    with pytest.raises(NotFoundError):
        await store.get_session(agent_id, session_id)
    with sqlite3.connect(tmp_path / "store.db") as raw:
        counts = [raw.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("sessions", "turns", "messages")]
    assert counts == [0, 0, 0]
    with pytest.raises(NotFoundError):
        await store.delete_agent(agent_id)


async def test_a_running_turn_without_a_lease_counts_as_expired(store: SqliteStore) -> None:
    """Turns left running by a version before leases (lease_until NULL) are failed by the first sweep."""
    agent_id = await _agent(store)
    session_id = await _session(store, agent_id)
    turn = _turn(agent_id, session_id)
    assert turn.lease_until is None
    await store.start_turn(turn, [])
    assert await store.fail_expired_turns(utcnow(), "restarted") == [ExpiredTurn(turn.turn_id)]
    record = await store.get_turn_record(session_id, turn.turn_id)
    assert record.status == "failed" and record.error is not None and record.error.code == "interrupted"


async def test_migrations_are_recorded_and_applied_once(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    for _ in range(2):
        reopened = SqliteStore(path)
        await reopened.open()
        await reopened.close()
    with sqlite3.connect(path) as raw:
        versions = [row[0] for row in raw.execute("SELECT version FROM schema_migrations")]
    assert versions == [version for version, _, _ in migration_scripts("sqlite")]
    assert versions[:3] == [1, 2, 3]


def test_table_rebuilds_keep_existing_rows(tmp_path: Path) -> None:
    """Migration 3 rebuilds sessions and turns with foreign keys off: rows and cascades must survive."""
    path = str(tmp_path / "old.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    migrate_sqlite(conn, up_to=2)
    conn.execute("INSERT INTO agents (agent_id, config, created_at) VALUES ('a', '{}', 't')")
    conn.execute("INSERT INTO sessions (session_id, agent_id, session_name, started_at) VALUES ('s', 'a', 'n', 't')")
    conn.execute(
        "INSERT INTO turns (turn_id, session_id, agent_id, status, input_messages, overrides, started_at) "
        "VALUES ('t', 's', 'a', 'completed', '[]', '{}', 't')"
    )
    conn.execute("INSERT INTO messages (session_id, turn_id, role, body) VALUES ('s', 't', 'user', '{}')")
    assert migrate_sqlite(conn, up_to=3) == ["0003_responses.sql"]
    assert conn.execute("SELECT agent_id FROM sessions").fetchall() == [("a",)]
    assert conn.execute("SELECT count(*) FROM messages").fetchone() == (1,)
    conn.execute("DELETE FROM agents WHERE agent_id = 'a'")
    counts = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("sessions", "turns", "messages")]
    assert counts == [0, 0, 0]
    conn.close()


def test_message_cache_decodes_each_row_once() -> None:
    cache = MessageCache(capacity=2)
    first = cache.load([(1, '{"role": "user", "content": "a"}'), (2, '{"role": "user", "content": "b"}')])
    again = cache.load([(1, "not even json"), (2, "ignored")])
    assert [m.content for m in again] == ["a", "b"] and again[0] is first[0]
    cache.load([(3, '{"role": "user", "content": "c"}')])
    with pytest.raises(ValueError):
        cache.load([(1, "not json")])


async def test_cursors_never_leave_their_connection_thread(tmp_path: Path) -> None:
    """A unit of work that returns a cursor gets None: the cursor is closed on its own thread."""
    runner = SqliteRunner(str(tmp_path / "r.db"))
    runner.prepare()
    try:
        assert await runner.write(lambda c: c.execute("CREATE TABLE t (x)")) is None
        assert await runner.write(lambda c: c.executemany("INSERT INTO t VALUES (?)", [(1,), (2,)])) is None
        assert await runner.read(lambda c: c.execute("SELECT count(*) FROM t").fetchone()) == (2,)
    finally:
        runner.close()
