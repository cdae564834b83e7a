"""The SQLite store: paging, ordering, cascades, the one-running-turn rule, its driver."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from ferryman.api.agents import Agent, AgentConfig
from ferryman.api.content import UserMessage
from ferryman.errors import ConflictError, NotFoundError
from ferryman.ids import new_id, utcnow
from ferryman.storage.base import ExpiredTurn, SessionRecord, TurnRecord
from ferryman.storage.codec import MessageCache
from ferryman.storage.domain.agents import agents
from ferryman.storage.sql.seam import count, first
from ferryman.storage.sql.sqlite import SqliteDriver, SqliteStore

pytestmark = pytest.mark.anyio


@pytest.fixture()
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(str(tmp_path / "store.db"))
    await opened.open()
    yield opened
    await opened.close()


async def _agent(store: SqliteStore) -> str:
    agent = Agent(agent_id=new_id(), agent_config=AgentConfig(model="m", instructions="i"), created_at=utcnow())
    await agents(store.kernel).create(agent)
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


async def test_deleting_a_session_cascades(store: SqliteStore, tmp_path: Path) -> None:
    agent_id = await _agent(store)
    session_id = await _session(store, agent_id)
    await store.start_turn(_turn(agent_id, session_id), [UserMessage(content="hi")])
    await store.delete_session(agent_id, session_id)
    with closing(sqlite3.connect(tmp_path / "store.db")) as raw:  # a connection's own ``with`` does not close it
        counts = [raw.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("sessions", "turns", "messages")]
        records = raw.execute("SELECT count(*) FROM records WHERE kind = 'session'").fetchone()[0]
    assert (counts, records) == ([0, 0, 0], 0)
    with pytest.raises(NotFoundError):
        await store.delete_session(agent_id, session_id)


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


def test_message_cache_decodes_each_row_once() -> None:
    cache = MessageCache(capacity=2)
    a, b = '{"role": "user", "content": "a"}', '{"role": "user", "content": "b"}'
    first = cache.load([(1, a), (2, b)])
    again = cache.load([(1, a), (2, b)])
    assert [m.content for m in again] == ["a", "b"] and again[0] is first[0]
    cache.load([(3, '{"role": "user", "content": "c"}')])
    with pytest.raises(ValueError):
        cache.load([(1, "not json")])


def test_message_cache_never_serves_another_body_under_a_reused_row_id() -> None:
    cache = MessageCache()
    cache.load([(7, '{"role": "user", "content": "a deleted session\'s secret"}')])
    reused = cache.load([(7, '{"role": "user", "content": "someone else\'s message"}')])
    assert [m.content for m in reused] == ["someone else's message"]


def test_message_cache_keeps_the_order_of_rows_known_rewritten_and_new() -> None:
    cache = MessageCache()
    body = '{{"role": "user", "content": "{}"}}'.format
    first = cache.load([(1, body("a")), (2, body("b")), (3, body("c"))])
    mixed = cache.load([(1, body("a")), (2, body("b, redacted")), (3, body("c")), (4, body("d")), (5, body("e"))])
    assert [m.content for m in mixed] == ["a", "b, redacted", "c", "d", "e"]
    assert mixed[0] is first[0] and mixed[2] is first[2] and mixed[1] is not first[1]


async def test_cursors_never_leave_their_connection_thread(tmp_path: Path) -> None:
    """Queries hand back rows or counts, never a cursor: each is closed on its connection's own thread."""
    driver = SqliteDriver(str(tmp_path / "r.db"))
    await driver.open()
    try:
        assert await driver.write(count("CREATE TABLE t (x)")) == -1
        assert await driver.write(count("INSERT INTO t VALUES (1), (2)")) == 2
        assert await driver.read(first("SELECT count(*) FROM t")) == (2,)
    finally:
        await driver.close()
