"""The SQL schema's one history (Alembic), on SQLite and PostgreSQL: from an empty database, and from the
databases the earlier, home-made runner left (upgraded in place, nothing lost, stored frames become data)."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import pytest
import sqlalchemy as sa
from alembic import command
from legacy_agents import AGENT_OWNERS, AGENTS, ALICE, BOB, ORPHAN_AGENT, assert_agents_moved
from legacy_agents import principal as agent_principal
from legacy_conversations import (
    CONVERSATION_OWNERS,
    CONVERSATIONS,
    ITEMS,
    ORPHAN_CONVERSATION,
    RESPONSE_ID,
    TALKED,
    assert_conversations_moved,
)
from legacy_files import FILE_OWNERS, FILES, ORPHAN_FILE, assert_files_moved
from legacy_registries import (
    API_KEYS,
    MODELS,
    ORPHAN,
    OWNERS,
    REGISTERED,
    SHIELDS,
    TOOLGROUPS,
    assert_moved,
    principal,
    registered_at,
    same_registration,
)
from legacy_responses import ORPHAN_RESPONSE, RESPONSE_OWNERS, RESPONSES, assert_responses_moved
from legacy_responses import owner_of as response_owner
from legacy_schema import build_postgres, build_sqlite
from legacy_sessions import ORPHAN_SESSION, SESSION_OWNERS, SESSIONS, assert_sessions_moved
from legacy_sessions import owner_of as session_owner
from legacy_vector_stores import (
    BATCH,
    INDEXED,
    ORPHAN_STORE,
    STORE_OWNERS,
    STORES,
    assert_vector_stores_moved,
    sql_rows,
)
from legacy_vector_stores import WHEN as STORES_WHEN
from storage_backends import CONNECT_TIMEOUT, POSTGRES_URL, postgres_store
from store_records import response_start

from ferryman.api.agents import Agent, AgentConfig
from ferryman.api.content import CompletionMessage, UserMessage
from ferryman.api.responses import Item, Response
from ferryman.errors import ConfigurationError, NotFoundError
from ferryman.storage import codec
from ferryman.storage.base import ConversationRecord, IdempotencyRecord, SessionRecord, StoredEvent, TurnRecord
from ferryman.storage.domain.agents import agents, sessions
from ferryman.storage.domain.file_batches import file_batch
from ferryman.storage.domain.kinds import CONVERSATION, MODEL
from ferryman.storage.domain.responses import head_of, response_heads
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.ops import Page
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.knowledge import FileBatchRecord, FileRecord, VectorStoreRecord
from ferryman.storage.rows import ITEM
from ferryman.storage.sql.migrate import alembic_config, postgres_engine, sqlite_engine, upgrade
from ferryman.storage.sql.postgres import PostgresStore
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.storage.sql.store import SqlStore

pytestmark = pytest.mark.anyio

HEAD = "0031_file_batches_on_kernel"
ITEMS_NOW = "-- items, wherever the revision keeps them"
"""In a tuple of queries of what stays: the items, read from ``items`` before 0028 and from the records after."""
EVENTS_NOW = "-- responses' events, wherever the revision keeps them"
"""In a tuple of queries of what stays: the responses' stored events, from ``response_events`` before 0029 and from
their records' logs after."""
ANCHORS_NOW = "-- conversations' session ids, wherever the revision keeps them"
BATCHES_NOW = "-- file batches, wherever the revision keeps them"
"""In a tuple of queries of what stays: each file batch's id, store, creation time and cancellation, from
``file_batches`` before 0031 and from the records after."""
"""In a tuple of queries of what stays: each conversation's id and session id, from ``conversations`` before 0030 and
from the records' bodies after."""
# What the earlier runner's last version on main was, per dialect, and one it cannot adopt.
LATEST = {"sqlite": 6, "postgres": 4}
BEFORE_IDEMPOTENCY = {"sqlite": 5, "postgres": 3}
TOO_OLD = {"sqlite": 4, "postgres": 2}

WHEN = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
AGENT = Agent(agent_id="agent_old", agent_config=AgentConfig(model="m", instructions="be brief"), created_at=WHEN)
QUESTION, ANSWER = UserMessage(content="hi"), CompletionMessage(content="hello", stop_reason="end_of_turn")
RESPONSE = Response(id="resp_old", created_at=1740830400, status="completed", model="m", metadata={"k": "v"})
TURN_DATA = [
    json.dumps({"event": {"payload": {"event_type": "turn_start", "turn_id": "turn_old"}}}),
    # Data that reads like framing inside a JSON string must come through whole.
    json.dumps({"event": {"payload": {"event_type": "step_progress", "delta": "id: 9\ndata: not a frame"}}}),
]
RESPONSE_DATA = [
    json.dumps({"type": "response.created", "sequence_number": 0, "response_id": "resp_old"}),
    json.dumps({"type": "response.completed", "sequence_number": 1, "response_id": "resp_old"}),
]


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _insert(table: str, **literals: object) -> str:
    """An INSERT of SQL literals (strings are quoted here), the same text on both dialects."""
    values = ", ".join(_q(v) if isinstance(v, str) else "NULL" if v is None else str(v) for v in literals.values())
    return f"INSERT INTO {table} ({', '.join(literals)}) VALUES ({values})"  # noqa: S608


def legacy_rows(dialect: str, with_keys: bool) -> list[str]:
    """Rows of every kind, stream events as whole SSE frames, as the earlier versions wrote them."""
    stamp = WHEN.isoformat()
    inputs = json.dumps([QUESTION.model_dump(mode="json")])
    turn = {"input_messages": inputs, "overrides": "{}", "started_at": stamp, "completed_at": stamp}
    found = [
        _insert("agents", agent_id="agent_old", config=AGENT.agent_config.model_dump_json(), created_at=stamp),
        _insert("sessions", session_id="sess_old", agent_id="agent_old", session_name="n", started_at=stamp),
        _insert("sessions", session_id="sess_resp", agent_id=None, session_name="r", started_at=stamp),
        _insert(
            "turns",
            turn_id="turn_old",
            session_id="sess_old",
            agent_id="agent_old",
            status="completed",
            output_message=ANSWER.model_dump_json(),
            infer_iters=1,
            **turn,
        ),
        _insert("turns", turn_id="turn_resp", session_id="sess_resp", agent_id=None, status="completed", **turn),
        *(
            _insert("messages", session_id="sess_old", turn_id="turn_old", role=m.role, body=m.model_dump_json())
            for m in (QUESTION, ANSWER)
        ),
        _insert(
            "models",
            model_id="extra",
            provider_id="openai",
            provider_resource_id="gpt",
            model_type="llm",
            metadata="{}",
            created_at=stamp,
        ),
        _insert(
            "responses",
            response_id="resp_old",
            turn_id="turn_resp",
            session_id="sess_resp",
            status="completed",
            body=RESPONSE.model_dump_json(),
            created_at=RESPONSE.created_at,
        ),
        *(
            _insert("turn_events", turn_id="turn_old", seq=seq, body=f"id: {seq}\ndata: {data}\n\n")
            for seq, data in enumerate(TURN_DATA)
        ),
        *(
            _insert(
                "response_events",
                response_id="resp_old",
                seq=seq,
                body=f"id: {seq}\nevent: {json.loads(data)['type']}\ndata: {data}\n\n",
            )
            for seq, data in enumerate(RESPONSE_DATA)
        ),
    ]
    if with_keys:
        sqlite = dialect == "sqlite"
        found.append(
            _insert(
                "idempotency_keys",
                owner="",
                idempotency_key="key-1",
                token="tok",
                fingerprint="fp",
                result='{"status": 200}',
                created_at=WHEN.timestamp() if sqlite else stamp,
                expires_at=4102444800.0 if sqlite else "2100-01-01T00:00:00+00:00",
            )
        )
    return found


@dataclass
class Database:
    """One throwaway database of a dialect: build it as the earlier runner did, open the store on it."""

    dialect: str
    legacy: Callable[[int, list[str]], Awaitable[None]]
    store: Callable[[], SqlStore]
    tables: Callable[[], Awaitable[set[str]]]
    revision: Callable[[], Awaitable[list[str]]]
    query: Callable[[str], Awaitable[list[tuple[Any, ...]]]]
    """Run one statement of SQL; its rows."""
    migrate: Callable[[str, bool], Awaitable[None]]
    """Bring the schema up (or, when the flag is set, down) to a revision, as Alembic does."""


def _alembic(conn: sa.Connection, target: str, down: bool) -> None:
    if down:
        command.downgrade(alembic_config(conn), target)
    else:
        upgrade(conn, target)


@pytest.fixture(params=["sqlite", "postgres"])
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    if request.param == "sqlite":
        path = tmp_path / "legacy.db"

        async def legacy_sqlite(up_to: int, rows: list[str]) -> None:
            conn = build_sqlite(path, up_to)
            for row in rows:
                conn.execute(row)
            conn.close()

        def query(sql: str) -> list[tuple[Any, ...]]:
            with sqlite3.connect(path) as conn:
                return conn.execute(sql).fetchall()

        async def sqlite_query(sql: str) -> list[tuple[Any, ...]]:
            return query(sql)

        async def sqlite_tables() -> set[str]:
            return {row[0] for row in query("SELECT name FROM sqlite_master WHERE type = 'table'")}

        async def sqlite_revision() -> list[str]:
            return [row[0] for row in query("SELECT version_num FROM alembic_version")]

        async def sqlite_migrate(target: str, down: bool) -> None:
            engine = sqlite_engine(str(path))
            try:
                with engine.begin() as conn:
                    _alembic(conn, target, down)
            finally:
                engine.dispose()

        yield Database(
            "sqlite",
            legacy_sqlite,
            lambda: SqliteStore(str(path)),
            sqlite_tables,
            sqlite_revision,
            sqlite_query,
            sqlite_migrate,
        )
        return
    async with postgres_store(tmp_path):  # skips (or, under CI, fails) when PostgreSQL is unreachable
        pass
    schema = f"migr_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(POSTGRES_URL, timeout=CONNECT_TIMEOUT)
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    await admin.execute(f'SET search_path TO "{schema}"')

    async def legacy_postgres(up_to: int, rows: list[str]) -> None:
        await build_postgres(admin, up_to)
        for row in rows:
            await admin.execute(row)

    async def postgres_tables() -> set[str]:
        found = await admin.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
        return {row[0] for row in found}

    async def postgres_revision() -> list[str]:
        return [row[0] for row in await admin.fetch("SELECT version_num FROM alembic_version")]

    async def postgres_query(sql: str) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in await admin.fetch(sql)]

    async def postgres_migrate(target: str, down: bool) -> None:
        engine = postgres_engine(POSTGRES_URL, schema)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(_alembic, target, down)
        finally:
            await engine.dispose()

    try:
        yield Database(
            "postgres",
            legacy_postgres,
            lambda: PostgresStore(POSTGRES_URL, schema=schema),
            postgres_tables,
            postgres_revision,
            postgres_query,
            postgres_migrate,
        )
    finally:
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()


async def _check_kernel(database: Database, check: Callable[[Kernel], Awaitable[None]]) -> None:
    """Open the database's store (migrating it to the head) and check its kernel."""
    store = database.store()
    await store.open()
    try:
        await check(store.kernel)
    finally:
        await store.close()


async def test_an_empty_database_gets_every_revision(database: Database) -> None:
    store = database.store()
    await store.open()
    try:
        await agents(store.kernel).create(AGENT)
        assert await agents(store.kernel).get(AGENT.agent_id) == AGENT
    finally:
        await store.close()
    assert await database.revision() == [HEAD]
    assert "schema_migrations" not in await database.tables()


async def test_reopening_applies_nothing_again(database: Database) -> None:
    for _ in range(2):
        store = database.store()
        await store.open()
        await store.close()
    assert await database.revision() == [HEAD]


async def test_the_schema_on_main_upgrades_in_place_with_its_rows_and_frames_become_data(database: Database) -> None:
    await database.legacy(LATEST[database.dialect], legacy_rows(database.dialect, with_keys=True))
    store = database.store()
    await store.open()
    try:
        assert await agents(store.kernel).get(AGENT.agent_id) == AGENT
        assert await sessions(store.kernel).get("sess_old") == SessionRecord("sess_old", "agent_old", "n", WHEN)
        [turn] = await store.list_turns(["sess_old"])
        assert (turn.turn_id, turn.status, turn.output_message, turn.input_messages) == (
            "turn_old",
            "completed",
            ANSWER,
            [QUESTION],
        )
        assert await store.load_history("sess_old", "turn_old") == [QUESTION, ANSWER]
        assert await store.turn_events_after("turn_old", -1) == [StoredEvent(i, d) for i, d in enumerate(TURN_DATA)]
        assert await store.events_after("resp_old", 0) == [StoredEvent(1, RESPONSE_DATA[1])]
        assert (await store.get_response("resp_old")).response == RESPONSE
        [models] = await store.kernel.read([Page(MODEL)])
        assert [(rec.id, rec.body["provider_resource_id"]) for rec in models.items] == [("extra", "gpt")]
        claim = IdempotencyRecord("", "key-1", "new", "fp", WHEN, WHEN + timedelta(days=1))
        held = await store.claim_idempotency_key(claim, datetime.now(UTC))
        assert held is not None and (held.token, held.result) == ("tok", '{"status": 200}')
        # and the upgraded database takes new work as any other
        await store.save_turn_events("turn_old", 2, ['{"late": true}'])
        assert await store.turn_event_count("turn_old") == 3
    finally:
        await store.close()
    assert await database.revision() == [HEAD]
    assert "schema_migrations" not in await database.tables()


async def test_a_database_from_before_idempotency_keys_gets_them(database: Database) -> None:
    await database.legacy(BEFORE_IDEMPOTENCY[database.dialect], legacy_rows(database.dialect, with_keys=False))
    store = database.store()
    await store.open()
    try:
        assert await store.turn_events_after("turn_old", 0) == [StoredEvent(1, TURN_DATA[1])]
        claim = IdempotencyRecord("", "k", "t", "fp", WHEN, WHEN + timedelta(days=1))
        assert await store.claim_idempotency_key(claim, WHEN) is None
    finally:
        await store.close()
    assert await database.revision() == [HEAD]


async def test_an_older_legacy_database_is_refused_in_one_line_and_left_as_it_was(database: Database) -> None:
    await database.legacy(TOO_OLD[database.dialect], [])
    before = await database.tables()
    store = database.store()
    with pytest.raises(ConfigurationError, match=r"schema version \d of an early ferryman, too old") as refused:
        await store.open()
    await store.close()
    assert "\n" not in str(refused.value)
    assert await database.tables() == before


async def test_replicas_opening_together_migrate_once(database: Database) -> None:
    stores = [database.store() for _ in range(3)] if database.dialect == "postgres" else [database.store()]
    with anyio.fail_after(60):  # without the lock they wait on each other's tables
        await asyncio.gather(*(store.open() for store in stores))
    for store in stores:
        await store.close()
    assert await database.revision() == [HEAD]


async def test_the_data_revision_goes_down_to_the_frames_earlier_versions_read(tmp_path: Path) -> None:
    path = tmp_path / "down.db"
    store = SqliteStore(str(path))
    await store.open()
    await agents(store.kernel).create(AGENT)
    await store.create_session(SessionRecord("sess", AGENT.agent_id, "n", WHEN))
    turn = TurnRecord("turn", "sess", AGENT.agent_id, "in_progress", [QUESTION], WHEN)
    await store.start_turn(turn, [QUESTION])
    await store.save_turn_events("turn", 0, TURN_DATA)
    await store.close()
    engine = sqlite_engine(str(path))
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0002_idempotency_keys")
            frames = [row[0] for row in conn.execute(sa.text("SELECT body FROM turn_events ORDER BY seq"))]
    finally:
        engine.dispose()
    assert frames == [f"id: {seq}\ndata: {data}\n\n" for seq, data in enumerate(TURN_DATA)]
    store = SqliteStore(str(path))
    await store.open()
    try:
        assert await store.turn_events_after("turn", -1) == [StoredEvent(i, d) for i, d in enumerate(TURN_DATA)]
        assert await agents(store.kernel).get(AGENT.agent_id) == AGENT  # down to its table, and back
    finally:
        await store.close()


# -- the registries move into the kernel's records (0012) ---------------------------------------------------------

BEFORE_KERNEL = "0010_typed_principals"
REGISTRY_TABLES = {"models", "toolgroups", "shields", "api_keys"}


def registry_rows(dialect: str) -> list[str]:
    """Models, toolgroups, shields (some owned) and API keys (one revoked) as the versions at 0010 wrote them."""
    sqlite = dialect == "sqlite"

    def instant(moment: datetime | None) -> float | str | None:  # an API key's time column
        return None if moment is None else moment.timestamp() if sqlite else moment.isoformat()

    found = [
        _insert(
            "models",
            model_id=m.identifier,
            provider_id=m.provider_id,
            provider_resource_id=m.provider_resource_id,
            model_type=m.model_type,
            metadata=json.dumps(m.metadata),
            created_at=registered_at("model", index).isoformat(),
        )
        for index, m in enumerate(MODELS)
    ]
    for kind, table, column in (("toolgroup", "toolgroups", "toolgroup_id"), ("shield", "shields", "shield_id")):
        found += [
            _insert(
                table,
                **{column: value.identifier},
                body=value.model_dump_json(),
                created_at=registered_at(kind, index).isoformat(),
            )
            for index, value in enumerate(REGISTERED[kind])
        ]
    found += [
        _insert(
            "api_keys",
            name=name,
            key_hash=key_hash,
            attributes=json.dumps(attributes),
            created_at=instant(created),
            revoked_at=instant(revoked),
        )
        for name, key_hash, attributes, created, revoked in API_KEYS
    ]
    owners = {**OWNERS, ORPHAN: OWNERS[("model", "zeta")]}
    found += [
        _insert("record_owners", kind=kind, record_id=rid, principal=principal(owner), owner=json.dumps(owner))
        for (kind, rid), owner in owners.items()
    ]
    return found


def _epoch(value: datetime | str | float) -> float:
    """A time as either dialect returns it (SQLite: ISO text or epoch seconds), as epoch seconds."""
    if isinstance(value, float | int):
        return float(value)
    return (datetime.fromisoformat(value) if isinstance(value, str) else value).timestamp()


async def _assert_old_tables(database: Database) -> None:
    """The tables of 0010 hold what :func:`registry_rows` wrote (the orphan owner aside)."""
    models = await database.query(
        "SELECT model_id, provider_id, provider_resource_id, model_type, metadata, created_at FROM models ORDER BY id"
    )
    assert [(*row[:4], json.loads(row[4]), _epoch(row[5])) for row in models] == [
        (
            m.identifier,
            m.provider_id,
            m.provider_resource_id,
            m.model_type,
            m.metadata,
            registered_at("model", i).timestamp(),
        )
        for i, m in enumerate(MODELS)
    ]
    for kind, table, values in (("toolgroup", "toolgroups", TOOLGROUPS), ("shield", "shields", SHIELDS)):
        rows = await database.query(f"SELECT body, created_at FROM {table} ORDER BY id")  # noqa: S608
        assert len(rows) == len(values)
        for index, ((body, created), value) in enumerate(zip(rows, values, strict=True)):
            assert same_registration(body, value), body
            assert _epoch(created) == registered_at(kind, index).timestamp()
    keys = await database.query("SELECT name, key_hash, attributes, created_at, revoked_at FROM api_keys")
    assert sorted((*row[:2], json.loads(row[2]), _epoch(row[3]), row[4] and _epoch(row[4])) for row in keys) == sorted(
        (name, key_hash, attributes, created.timestamp(), revoked and revoked.timestamp())
        for name, key_hash, attributes, created, revoked in API_KEYS
    )
    owners = await _owner_rows(
        database,
        "SELECT kind, record_id, principal, owner FROM record_owners WHERE kind IN ('model', 'toolgroup', 'shield')",
    )
    assert {(row[0], row[1]): (row[2], json.loads(row[3])) for row in owners} == {
        key: (principal(owner), owner) for key, owner in OWNERS.items()
    }


async def test_registries_and_api_keys_move_into_the_kernel_with_their_owners(database: Database) -> None:
    await database.migrate(BEFORE_KERNEL, False)
    for row in registry_rows(database.dialect):
        await database.query(row)
    await _check_kernel(database, assert_moved)
    assert await database.revision() == [HEAD]
    assert not REGISTRY_TABLES & await database.tables()
    assert await _owner_rows(database, "SELECT kind, record_id FROM record_owners") == []


async def test_the_registries_go_down_to_the_old_tables_and_up_again(database: Database) -> None:
    await database.migrate(BEFORE_KERNEL, False)
    for row in registry_rows(database.dialect):
        await database.query(row)
    await database.migrate("head", False)
    await database.migrate("0011_kernel_tables", True)
    assert REGISTRY_TABLES <= await database.tables()
    await _assert_old_tables(database)
    assert await database.query("SELECT kind FROM records UNION ALL SELECT kind FROM record_terms") == []
    await database.migrate("head", False)  # and up again: the same records, owners and terms
    await _check_kernel(database, assert_moved)
    await database.migrate("0002_idempotency_keys", True)  # through every revision, with the data in place
    assert await database.revision() == ["0002_idempotency_keys"]


# -- a turn's response is read through an index (0014) ------------------------------------------------------------

TURN_RESPONSE = "SELECT response_id FROM responses WHERE turn_id = 'turn_x' AND session_id = 'sess_x'"


async def _indexes_read(database: Database, sql: str) -> set[str]:
    """The indexes the database's plan for ``sql`` reads (PostgreSQL told to avoid a scan wherever it can)."""
    if database.dialect == "sqlite":
        plan = [row[3] for row in await database.query(f"EXPLAIN QUERY PLAN {sql}")]
        return {used.group(1) for step in plan if (used := re.search(r"USING (?:COVERING )?INDEX (\w+)", step))}
    await database.query("SET enable_seqscan = off")  # an empty table's cheapest plan is a scan, index or not
    try:
        [(plan,)] = await database.query(f"EXPLAIN (FORMAT JSON) {sql}")
    finally:
        await database.query("RESET enable_seqscan")
    found: set[str] = set()
    nodes = [json.loads(plan)[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        found |= {node["Index Name"]} if "Index Name" in node else set()
        nodes += node.get("Plans", [])
    return found


async def test_a_turns_response_is_read_through_the_index_that_goes_down_with_its_revision(database: Database) -> None:
    await database.migrate("head", False)
    assert await _indexes_read(database, TURN_RESPONSE) == {"responses_of_turn"}
    await database.migrate("0013_live_turns", True)
    assert await _indexes_read(database, TURN_RESPONSE) == set()


# -- agents move into the kernel's records (0015) -----------------------------------------------------------------

BEFORE_AGENTS = "0014_responses_of_turn"


def agent_rows() -> list[str]:
    """Agents (two owned, one not), an owner row of an agent deleted long ago, and sessions of two agents."""
    found = [
        _insert(
            "agents",
            agent_id=agent.agent_id,
            config=agent.agent_config.model_dump_json(),
            created_at=agent.created_at.isoformat(),
        )
        for agent in AGENTS
    ]
    owners = {**AGENT_OWNERS, ORPHAN_AGENT: AGENT_OWNERS["agent_zeta"]}
    found += [
        _insert("record_owners", kind="agent", record_id=rid, principal=agent_principal(owner), owner=json.dumps(owner))
        for rid, owner in owners.items()
    ]
    found += [
        _insert("sessions", session_id=f"sess_{n}", agent_id=agent_id, session_name="s", started_at=WHEN.isoformat())
        for n, agent_id in enumerate(("agent_zeta", "agent_alpha", None))
    ]
    return found


async def _session_keys(database: Database) -> list[str]:
    """The tables ``sessions`` has foreign keys to."""
    if database.dialect == "sqlite":
        return [row[2] for row in await database.query("PRAGMA foreign_key_list(sessions)")]
    found = await database.query(
        "SELECT ccu.table_name FROM information_schema.table_constraints tc "
        "JOIN information_schema.constraint_column_usage ccu ON tc.constraint_name = ccu.constraint_name "
        "AND tc.constraint_schema = ccu.constraint_schema "
        "WHERE tc.table_name = 'sessions' AND tc.constraint_type = 'FOREIGN KEY' AND tc.table_schema = current_schema()"
    )
    return [row[0] for row in found]


async def _assert_agent_table(database: Database) -> None:
    """The table of 0014 holds the agents (in order) and ``record_owners`` their owners, the orphan's gone."""
    rows = await database.query("SELECT agent_id, config, created_at FROM agents ORDER BY id")
    assert [(row[0], json.loads(row[1]), _epoch(row[2])) for row in rows] == [
        (a.agent_id, a.agent_config.model_dump(mode="json"), a.created_at.timestamp()) for a in AGENTS
    ]
    owners = await _owner_rows(database, "SELECT record_id, principal, owner FROM record_owners WHERE kind = 'agent'")
    assert {row[0]: (row[1], json.loads(row[2])) for row in owners} == {
        rid: (agent_principal(owner), owner) for rid, owner in AGENT_OWNERS.items()
    }


async def test_agents_move_into_the_kernel_with_their_owners_and_sessions_lose_their_key(database: Database) -> None:
    await database.migrate(BEFORE_AGENTS, False)
    assert await _session_keys(database) == ["agents"]
    for row in agent_rows():
        await database.query(row)
    store = database.store()
    await store.open()
    try:
        await assert_agents_moved(store.kernel)
        page = await sessions(store.kernel).page(parent=None, where=("agent_id", "agent_zeta"))
        assert [s.session_id for s in page.items] == ["sess_0"]
    finally:
        await store.close()
    # No key: a session's anchor names an agent the store never checks (the service checks the kernel).
    await database.query(_insert("sessions", session_id="sess_new", agent_id="agent_unknown"))
    assert await database.revision() == [HEAD]
    assert "agents" not in await database.tables()
    assert await _session_keys(database) == []
    assert await _owner_rows(database, "SELECT record_id FROM record_owners WHERE kind = 'agent'") == []


async def test_agents_go_down_to_their_table_and_up_again(database: Database) -> None:
    await database.migrate(BEFORE_AGENTS, False)
    for row in agent_rows():
        await database.query(row)
    await database.migrate("head", False)
    orphan = SessionRecord("sess_orphan", "agent_gone", "s", WHEN)
    await _check_kernel(database, lambda kernel: sessions(kernel).create(orphan))
    await database.query(_insert("sessions", session_id="sess_orphan", agent_id="agent_gone"))
    inputs, stamp = json.dumps([QUESTION.model_dump(mode="json")]), WHEN.isoformat()
    for row in (
        _insert("turns", turn_id="turn_orphan", session_id="sess_orphan", agent_id="agent_gone", status="completed",
                input_messages=inputs, overrides="{}", started_at=stamp),
        _insert("steps", step_id="step_orphan", turn_id="turn_orphan", step_type="inference", body="{}"),
        _insert("messages", session_id="sess_orphan", turn_id="turn_orphan", role="user", body="{}"),
        _insert("turn_events", turn_id="turn_orphan", seq=0, body="{}"),
    ):  # fmt: skip
        await database.query(row)
    await database.migrate(BEFORE_AGENTS, True)
    # What hung under it goes too (SQLite's migration connection runs no cascades).
    for table in ("turns", "steps", "messages", "turn_events"):
        assert await database.query(f"SELECT 1 FROM {table} WHERE turn_id = 'turn_orphan'") == [], table  # noqa: S608
    await _assert_agent_table(database)
    assert await _session_keys(database) == ["agents"]
    # A session of an agent that is gone cannot stay under the key; the others do.
    assert sorted(row[0] for row in await database.query("SELECT session_id FROM sessions")) == [
        "sess_0",
        "sess_1",
        "sess_2",
    ]
    assert await database.query("SELECT id FROM records WHERE kind = 'agent'") == []
    await database.migrate("head", False)  # and up again: the same records, owners and terms
    await _check_kernel(database, assert_agents_moved)


# -- sessions count their history's changes (0016) ----------------------------------------------------------------


async def test_sessions_get_a_history_epoch_of_zero_that_goes_down_with_its_revision(database: Database) -> None:
    await database.migrate("0015_agents_on_kernel", False)
    await database.query(
        _insert("sessions", session_id="sess_old", agent_id="agent_x", session_name="s", started_at=WHEN.isoformat())
    )
    await database.migrate("head", False)
    assert await database.query("SELECT session_id, history_epoch FROM sessions") == [("sess_old", 0)]
    await database.migrate("0015_agents_on_kernel", True)
    assert await database.query("SELECT session_id, session_name FROM sessions") == [("sess_old", "s")]
    with pytest.raises(Exception, match="history_epoch"):
        await database.query("SELECT history_epoch FROM sessions")


# -- files move into the kernel's records (0020) ------------------------------------------------------------------

BEFORE_FILES = "0019_drop_fulltext"


def file_rows() -> list[str]:
    """Files (three owned, one not), newest first (their table's order is not theirs), and an orphan owner row."""
    found = [
        _insert(
            "files",
            file_id=f.file_id,
            filename=f.filename,
            purpose=f.purpose,
            bytes=f.bytes,
            created_at=f.created_at,
            mime_type=f.mime_type,
            expires_at=f.expires_at,
        )
        for f in reversed(FILES)
    ]
    owners = {**FILE_OWNERS, ORPHAN_FILE: FILE_OWNERS["file_zeta"]}
    found += [
        _insert("record_owners", kind="file", record_id=rid, principal=agent_principal(owner), owner=json.dumps(owner))
        for rid, owner in owners.items()
    ]
    return found


async def test_files_move_into_the_kernel_with_their_owners(database: Database) -> None:
    await database.migrate(BEFORE_FILES, False)
    for row in file_rows():
        await database.query(row)
    await _check_kernel(database, assert_files_moved)
    assert await database.revision() == [HEAD]
    assert "files" not in await database.tables()
    assert await _owner_rows(database, "SELECT record_id FROM record_owners WHERE kind = 'file'") == []


async def _indexes_of(database: Database, table: str) -> list[str]:
    if database.dialect == "sqlite":
        found = f"SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = '{table}'"
    else:
        found = f"SELECT indexname FROM pg_indexes WHERE tablename = '{table}' AND schemaname = current_schema()"
    return [row[0] for row in await database.query(found)]


async def test_files_go_down_to_their_table_and_up_again(database: Database) -> None:
    await database.migrate(BEFORE_FILES, False)
    for row in file_rows():
        await database.query(row)
    await database.migrate("head", False)
    await database.migrate(BEFORE_FILES, True)
    columns = "file_id, filename, purpose, bytes, created_at, mime_type, expires_at"
    rows = await database.query(f"SELECT {columns} FROM files ORDER BY created_at, file_id")  # noqa: S608
    assert [FileRecord(*row) for row in rows] == FILES
    assert "files_by_creation" in await _indexes_of(database, "files")
    owners = await _owner_rows(database, "SELECT record_id, principal, owner FROM record_owners WHERE kind = 'file'")
    assert {row[0]: (row[1], json.loads(row[2])) for row in owners} == {
        rid: (agent_principal(owner), owner) for rid, owner in FILE_OWNERS.items()
    }
    assert await database.query("SELECT id FROM records WHERE kind = 'file'") == []
    assert await database.query("SELECT term FROM record_terms WHERE kind = 'file'") == []
    await database.migrate("head", False)  # and up again: the same records, owners and terms
    await _check_kernel(database, assert_files_moved)


# -- vector stores' settings move into the kernel's records; the chunk index keeps its anchor (0021) ---------------

BEFORE_VECTOR_STORES = "0020_files_on_kernel"
ANCHOR = ["vector_store_id", "embedding_dimension", "version", "removals_from"]
SETTINGS = (
    "vector_store_id, name, created_at, embedding_model, embedding_dimension, metadata, chunking_strategy, "
    "expires_after, last_active_at, provider_id, provider_vector_db_id"
)
CHUNK_INDEX = (
    "SELECT vector_store_id, embedding_dimension, version, removals_from FROM vector_stores ORDER BY vector_store_id",
    "SELECT vector_store_id, file_id, status, usage_bytes, batch_id FROM vector_store_files",
    BATCHES_NOW,
    "SELECT vector_store_id, chunk_id, file_id, text, version FROM chunks",
    "SELECT vector_store_id, version, file_id FROM chunk_removals",
)
"""What the chunk index keeps of the stores: every table that names ``vector_stores`` with a cascading key."""


async def _owner_rows(database: Database, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``record_owners`` (none once revision 0026 dropped the table with the last kind it held)."""
    if "record_owners" not in await database.tables():
        return []
    return await database.query(sql)


async def _kept(database: Database, queries: tuple[str, ...] = CHUNK_INDEX) -> list[list[tuple[Any, ...]]]:
    return [await database.query(_now(sql, await database.tables(), database.dialect)) for sql in queries]


def _now(sql: str, tables: set[str], dialect: str) -> str:
    """A query of what stays, where the revision of these tables keeps it (items: ``items`` before 0028, the
    kernel's records after; responses' events: ``response_events`` before 0029, their records' logs after;
    conversations' session ids: ``conversations`` before 0030, their records after; file batches:
    ``file_batches`` before 0031, their records after)."""
    if sql == BATCHES_NOW:
        if "file_batches" in tables:
            flag = "CASE WHEN cancelled THEN 1 ELSE 0 END"
            return f"SELECT batch_id, vector_store_id, created_at, {flag} FROM file_batches ORDER BY batch_id"  # noqa: S608
        if dialect == "sqlite":
            created, flag = "json_extract(body, '$.created_at')", "json_extract(body, '$.cancelled')"
        else:
            created = "(body::json ->> 'created_at')::bigint"
            flag = "CASE WHEN (body::json ->> 'cancelled')::boolean THEN 1 ELSE 0 END"
        return f"SELECT id, parent, {created}, {flag} FROM records WHERE kind = 'file_batch' ORDER BY id"  # noqa: S608
    if sql == ANCHORS_NOW:
        if "conversations" in tables:
            return "SELECT conversation_id, session_id FROM conversations ORDER BY id"
        session = "json_extract(body, '$.session_id')" if dialect == "sqlite" else "(body::json ->> 'session_id')"
        return f"SELECT id, {session} FROM records WHERE kind = 'conversation' ORDER BY seq"  # noqa: S608
    if sql == ITEMS_NOW:
        if "items" in tables:
            return "SELECT owner, item_id, body FROM items ORDER BY id"
        return "SELECT parent, substr(id, length(parent) + 2), body FROM records WHERE kind = 'item' ORDER BY seq"
    if sql == EVENTS_NOW:
        if "response_events" in tables:
            return "SELECT response_id, seq, body FROM response_events ORDER BY response_id, seq"
        return (
            "SELECT r.id, l.n, l.body FROM record_logs l JOIN records r ON r.seq = l.rec_seq "
            "WHERE r.kind = 'response' AND l.channel = 'events' ORDER BY r.id, l.n"
        )
    return sql


async def _columns_of(database: Database, table: str) -> list[str]:
    if database.dialect == "sqlite":
        return [row[1] for row in await database.query(f"PRAGMA table_info({table})")]
    found = await database.query(
        "SELECT column_name FROM information_schema.columns "
        f"WHERE table_name = '{table}' AND table_schema = current_schema() ORDER BY ordinal_position"
    )
    return [row[0] for row in found]


async def _stores_at_0020(database: Database) -> list[list[tuple[Any, ...]]]:
    """The stores, their owners and the first one's chunk index at 0020; what the chunk index holds."""
    await database.migrate(BEFORE_VECTOR_STORES, False)
    for row in sql_rows(database.dialect):
        await database.query(row)
    before = await _kept(database)
    assert all(before), before
    return before


def _settings_row(row: tuple[Any, ...]) -> VectorStoreRecord:
    """A store of a row of :data:`SETTINGS`."""
    metadata, strategy, expires_after = (None if value is None else json.loads(value) for value in row[5:8])
    return VectorStoreRecord(*row[:5], metadata, strategy, expires_after, *row[8:])


async def test_vector_stores_move_into_the_kernel_with_their_owners_and_keep_their_chunk_index(
    database: Database,
) -> None:
    before = await _stores_at_0020(database)
    await _check_kernel(database, assert_vector_stores_moved)
    assert await database.revision() == [HEAD]
    assert await _kept(database) == before  # attachments, batches, chunks, removals, versions: all there
    assert await _columns_of(database, "vector_stores") == ANCHOR
    assert "vector_stores_by_creation" not in await _indexes_of(database, "vector_stores")
    assert await _owner_rows(database, "SELECT record_id FROM record_owners WHERE kind = 'vector_store'") == []
    if database.dialect == "sqlite":
        assert await database.query("PRAGMA foreign_key_check") == []


async def test_vector_stores_go_down_to_their_table_and_up_again(database: Database) -> None:
    before = await _stores_at_0020(database)
    await database.migrate("head", False)
    await database.migrate(BEFORE_VECTOR_STORES, True)
    rows = await database.query(f"SELECT {SETTINGS} FROM vector_stores ORDER BY created_at, vector_store_id")
    assert [_settings_row(row) for row in rows] == STORES
    assert "vector_stores_by_creation" in await _indexes_of(database, "vector_stores")
    if database.dialect == "postgres":  # as 0006 made them: no defaults (SQLite keeps those they were added with)
        defaults = await database.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'vector_stores' "
            "AND table_schema = current_schema() AND column_default IS NOT NULL"
        )
        assert defaults == [("removals_from",)]
    owners = await _owner_rows(
        database, "SELECT record_id, principal, owner FROM record_owners WHERE kind = 'vector_store'"
    )
    assert {row[0]: (row[1], json.loads(row[2])) for row in owners} == {
        rid: (agent_principal(owner), owner) for rid, owner in STORE_OWNERS.items()
    }
    assert ORPHAN_STORE not in {row[0] for row in owners}
    assert await database.query("SELECT id FROM records WHERE kind = 'vector_store'") == []
    assert await database.query("SELECT term FROM record_terms WHERE kind = 'vector_store'") == []
    assert await _kept(database) == before
    await database.migrate("head", False)  # and up again: the same records, owners and terms
    await _check_kernel(database, assert_vector_stores_moved)
    assert await _kept(database) == before


# -- conversations move into the kernel's records; responses keep their anchor (0023) -----------------------------

BEFORE_CONVERSATIONS = "0022_record_terms_hash"
CONVERSATION_KEPT = (
    ANCHORS_NOW,
    ITEMS_NOW,
    "SELECT response_id, turn_id, session_id, conversation_id, status, body, created_at FROM responses",
    "SELECT id, session_id, agent_id FROM sessions ORDER BY id",
)
"""What stays of the conversations: the anchor a response's start holds, their items, responses and sessions."""


def conversation_rows() -> list[str]:
    """Conversations (two owned, one not) in creation order with their sessions, an orphan owner row, and the
    first one's items and a response made in it, as the versions at ``0022_record_terms_hash`` wrote them."""
    stamp = WHEN.isoformat()
    found = [
        _insert("sessions", session_id=c.session_id, agent_id=None, session_name="conversation", started_at=stamp)
        for c in CONVERSATIONS
    ]
    found += [
        _insert(
            "conversations",
            conversation_id=c.conversation_id,
            session_id=c.session_id,
            metadata=json.dumps(c.metadata),
            created_at=c.created_at,
        )
        for c in CONVERSATIONS
    ]
    owners = {**CONVERSATION_OWNERS, ORPHAN_CONVERSATION: ALICE}
    found += [
        _insert(
            "record_owners",
            kind="conversation",
            record_id=rid,
            principal=agent_principal(owner),
            owner=json.dumps(owner),
        )
        for rid, owner in owners.items()
    ]
    session = CONVERSATIONS[0].session_id
    found += [
        _insert("turns", turn_id="turn_zeta", session_id=session, agent_id=None, status="completed",
                input_messages="[]", overrides="{}", started_at=stamp),
        _insert("responses", response_id=RESPONSE_ID, turn_id="turn_zeta", session_id=session, conversation_id=TALKED,
                status="completed", body=RESPONSE.model_dump_json(), created_at=RESPONSE.created_at),
        *(_insert("items", item_id=item_id, owner=TALKED, body=json.dumps(body)) for item_id, body in ITEMS.items()),
    ]  # fmt: skip
    return found


def _conversation(conversation_id: str, session_id: str) -> list[str]:
    """A conversation as the versions from ``0023_conversations_on_kernel`` to ``0029`` wrote it: its record and
    its anchor."""
    body = {"conversation_id": conversation_id, "session_id": session_id, "metadata": {}, "created_at": 1}
    return [
        _insert("records", kind="conversation", id=conversation_id, parent="", body=json.dumps(body), at=1.0),
        _insert("conversations", conversation_id=conversation_id, session_id=session_id),
    ]


async def _conversations_at_0022(database: Database) -> list[list[tuple[Any, ...]]]:
    """The conversations, their owners and the first one's items and response at 0022; what stays of them."""
    await database.migrate(BEFORE_CONVERSATIONS, False)
    for row in conversation_rows():
        await database.query(row)
    before = await _kept(database, CONVERSATION_KEPT)
    assert all(before), before
    return before


async def test_conversations_move_into_the_kernel_with_their_owners_and_keep_their_anchor(
    database: Database,
) -> None:
    before = await _conversations_at_0022(database)
    await database.migrate("0029_response_events_in_logs", False)  # the anchor as 0023 left it, before 0030
    assert await _columns_of(database, "conversations") == ["id", "conversation_id", "session_id"]
    await _check_kernel(database, assert_conversations_moved)
    assert await database.revision() == [HEAD]
    assert await _kept(database, CONVERSATION_KEPT) == before  # session ids, items, responses: all there
    assert await _owner_rows(database, "SELECT record_id FROM record_owners WHERE kind = 'conversation'") == []
    if database.dialect == "sqlite":
        assert await database.query("PRAGMA foreign_key_check") == []


async def test_conversations_go_down_to_their_table_and_up_again(database: Database) -> None:
    before = await _conversations_at_0022(database)
    await database.migrate("head", False)
    await database.migrate(BEFORE_CONVERSATIONS, True)
    rows = await database.query(
        "SELECT conversation_id, session_id, metadata, created_at FROM conversations ORDER BY id"
    )
    assert [ConversationRecord(row[0], row[1], json.loads(row[2]), row[3]) for row in rows] == CONVERSATIONS
    if database.dialect == "postgres":  # as 0001 made them: no defaults (SQLite keeps those they were added with)
        defaults = await database.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'conversations' "
            "AND table_schema = current_schema() AND column_default IS NOT NULL"
        )
        assert defaults == [("id",)]
    owners = await _owner_rows(
        database, "SELECT record_id, principal, owner FROM record_owners WHERE kind = 'conversation'"
    )
    assert {row[0]: (row[1], json.loads(row[2])) for row in owners} == {
        rid: (agent_principal(owner), owner) for rid, owner in CONVERSATION_OWNERS.items()
    }
    assert await database.query("SELECT id FROM records WHERE kind = 'conversation'") == []
    assert await database.query("SELECT term FROM record_terms WHERE kind = 'conversation'") == []
    assert await _kept(database, CONVERSATION_KEPT) == before
    await database.migrate("head", False)  # and up again: the same records, owners and terms
    await _check_kernel(database, assert_conversations_moved)
    assert await _kept(database, CONVERSATION_KEPT) == before


# -- sessions move into the kernel's records; their turns keep their anchor (0024) ----------------------------------

BEFORE_SESSIONS = "0023_conversations_on_kernel"
SESSION_KEPT = (
    "SELECT id, session_id, agent_id, history_epoch FROM sessions ORDER BY id",
    "SELECT id, turn_id, session_id, agent_id, status FROM turns ORDER BY id",
    "SELECT id, session_id, turn_id, role, body FROM messages ORDER BY id",
    ANCHORS_NOW,
)
"""What stays of the sessions: the anchor (with its history epoch), and what names it or is owned beside it."""
SESSION_RECORDS = (
    "SELECT kind, id, parent, parent_seq, owner_key, owner, body, status, lease_until, at, k1, k2, k3, slot "
    "FROM records WHERE kind = 'session' ORDER BY seq"
)
SESSION_TERMS = (
    "SELECT r.id, t.term FROM record_terms t JOIN records r ON r.seq = t.seq WHERE t.kind = 'session' "
    "ORDER BY r.id, t.term"
)


def _session_stamp(dialect: str, moment: datetime) -> str:
    """A session's start as that version wrote it: ISO text in UTC on SQLite; PostgreSQL takes any offset."""
    return moment.astimezone(UTC).isoformat() if dialect == "sqlite" else moment.isoformat()


def session_rows(dialect: str) -> list[str]:
    """Sessions (some owned) in creation order, each with its own history epoch, an orphan owner row, turns of
    three (one a holder's of forks' history), messages of one, a conversation's anchor on the response's session,
    and a turn's owner row, as the versions at ``0023_conversations_on_kernel`` wrote them."""
    stamp = WHEN.isoformat()
    found = [
        _insert("sessions", session_id=s.session_id, agent_id=s.agent_id, session_name=s.session_name,
                started_at=_session_stamp(dialect, s.started_at), history_epoch=n)
        for n, s in enumerate(SESSIONS)
    ]  # fmt: skip
    owners = {**SESSION_OWNERS, ORPHAN_SESSION: SESSION_OWNERS["sess_zeta"]}
    found += [
        _insert(
            "record_owners", kind="session", record_id=rid, principal=agent_principal(owner), owner=json.dumps(owner)
        )
        for rid, owner in owners.items()
    ]
    for turn_id, session_id, agent_id in (
        ("turn_zeta", "sess_zeta", "agent_zeta"),
        ("turn_resp", "sess_resp", None),
        ("turn_held", "sess_held", "agent_zeta"),
    ):
        found.append(
            _insert("turns", turn_id=turn_id, session_id=session_id, agent_id=agent_id, status="completed",
                    input_messages="[]", overrides="{}", started_at=stamp)
        )  # fmt: skip
    found += [
        _insert("messages", session_id="sess_zeta", turn_id="turn_zeta", role=m.role, body=m.model_dump_json())
        for m in (QUESTION, ANSWER)
    ]
    found += [
        *_conversation("conv_resp", "sess_resp"),
        _insert(
            "record_owners", kind="turn", record_id="turn_zeta", principal=agent_principal(BOB), owner=json.dumps(BOB)
        ),
    ]
    return found


async def _sessions_at_0023(database: Database) -> list[list[tuple[Any, ...]]]:
    """The sessions, their owners, turns and what else names them at 0023; what stays of them."""
    await database.migrate(BEFORE_SESSIONS, False)
    for row in session_rows(database.dialect):
        await database.query(row)
    before = await _kept(database, SESSION_KEPT)
    assert all(before), before
    return before


async def test_sessions_move_into_the_kernel_with_their_owners_and_keep_their_anchor(database: Database) -> None:
    before = await _sessions_at_0023(database)
    await _check_kernel(database, assert_sessions_moved)
    assert await database.revision() == [HEAD]
    assert await _kept(database, SESSION_KEPT) == before  # anchors, turns, messages, conversations: all there
    assert await _columns_of(database, "sessions") == ["id", "session_id", "agent_id", "history_epoch"]
    assert await _owner_rows(database, "SELECT record_id FROM record_owners WHERE kind = 'session'") == []
    # Roots, indexed by their agent (none for a session of no agent).
    found = await database.query("SELECT id, parent, parent_seq, k1, k2, k3 FROM records WHERE kind = 'session'")
    assert sorted(found) == sorted((s.session_id, "", None, s.agent_id, None, None) for s in SESSIONS)
    if database.dialect == "sqlite":
        assert await database.query("PRAGMA foreign_key_check") == []


async def test_the_moved_sessions_are_the_records_the_application_writes(database: Database) -> None:
    await _sessions_at_0023(database)
    await database.migrate("head", False)
    moved = [await database.query(SESSION_RECORDS), await database.query(SESSION_TERMS)]

    async def rewrite(kernel: Kernel) -> None:
        records = sessions(kernel)
        for session in SESSIONS:
            assert await records.delete(session.session_id)
        for session in SESSIONS:
            await records.create(session, owner=session_owner(session.session_id))

    await _check_kernel(database, rewrite)
    assert [await database.query(SESSION_RECORDS), await database.query(SESSION_TERMS)] == moved


async def test_sessions_go_down_to_their_table_and_up_again(database: Database) -> None:
    before = await _sessions_at_0023(database)
    await database.migrate("head", False)
    await database.migrate(BEFORE_SESSIONS, True)
    rows = await database.query("SELECT session_id, agent_id, session_name, started_at FROM sessions ORDER BY id")
    if database.dialect == "sqlite":  # its start as that version's store wrote it
        assert [row[3] for row in rows] == [codec.dump_time(s.started_at) for s in SESSIONS]
    started = [codec.require_time(row[3]) if isinstance(row[3], str) else row[3] for row in rows]
    assert [SessionRecord(row[0], row[1], row[2], at) for row, at in zip(rows, started, strict=True)] == SESSIONS
    if database.dialect == "postgres":  # as 0001 made them: no defaults (SQLite keeps those they were added with)
        defaults = await database.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'sessions' "
            "AND table_schema = current_schema() AND column_default IS NOT NULL ORDER BY column_name"
        )
        assert defaults == [("history_epoch",), ("id",)]
    owners = await _owner_rows(database, "SELECT record_id, principal, owner FROM record_owners WHERE kind = 'session'")
    assert {row[0]: (row[1], json.loads(row[2])) for row in owners} == {
        rid: (agent_principal(owner), owner) for rid, owner in SESSION_OWNERS.items()
    }
    assert await database.query("SELECT id FROM records WHERE kind = 'session'") == []
    assert await database.query("SELECT term FROM record_terms WHERE kind = 'session'") == []
    assert await _kept(database, SESSION_KEPT) == before
    await database.migrate("head", False)  # and up again: the same records, owners and terms
    await _check_kernel(database, assert_sessions_moved)
    assert await _kept(database, SESSION_KEPT) == before


# -- each response gets its listing record in the kernel; its row stays as it was (0025) ---------------------------

BEFORE_RESPONSES = "0024_sessions_on_kernel"
RESPONSE_KEPT = (
    "SELECT id, response_id, turn_id, session_id, conversation_id, previous_response_id, status, background, body, "
    "created_at FROM responses ORDER BY id",
    EVENTS_NOW,
    ITEMS_NOW,
    "SELECT id, turn_id, session_id FROM turns ORDER BY id",
    ANCHORS_NOW,
)
"""What stays of the responses: their rows whole, their events and input items, what they run as and in, and
owners of other kinds."""
PREVIOUS = {"resp_beta": "resp_alpha"}
"""A response that continues another (outside any conversation)."""
RESPONSE_RECORDS = (
    "SELECT kind, id, parent, parent_seq, owner_key, owner, body, status, lease_until, at, k1, k2, k3, slot "
    "FROM records WHERE kind = 'response' ORDER BY seq"
)
RESPONSE_TERMS = (
    "SELECT r.id, t.term FROM record_terms t JOIN records r ON r.seq = t.seq WHERE t.kind = 'response' "
    "ORDER BY r.id, t.term"
)


def response_rows() -> list[str]:
    """Responses (some owned, some in conversations) in creation order, each with its turn in one session, the
    conversations' anchors, the first one's events and input items, an orphan owner row and a turn's owner row,
    as the versions at ``0024_sessions_on_kernel`` wrote them."""
    stamp = WHEN.isoformat()
    found = [_insert("sessions", session_id="sess_resp", agent_id=None)]
    talked = dict.fromkeys(r.conversation_id for r in RESPONSES if r.conversation_id is not None)
    found += [row for c in talked for row in _conversation(c, "sess_resp")]
    for r in RESPONSES:
        turn_id = f"turn_{r.response_id}"
        body = RESPONSE.model_copy(update={"id": r.response_id, "created_at": r.created_at}).model_dump_json()
        previous = PREVIOUS.get(r.response_id)
        found += [
            _insert("turns", turn_id=turn_id, session_id="sess_resp", agent_id=None, status="completed",
                    input_messages="[]", overrides="{}", started_at=stamp),
            _insert("responses", response_id=r.response_id, turn_id=turn_id, session_id="sess_resp",
                    conversation_id=r.conversation_id, previous_response_id=previous, status="completed", body=body,
                    created_at=r.created_at),
        ]  # fmt: skip
    first = RESPONSES[0].response_id
    found += [
        _insert("response_events", response_id=first, seq=seq, body=data) for seq, data in enumerate(RESPONSE_DATA)
    ]
    found += [_insert("items", item_id=item_id, owner=first, body=json.dumps(body)) for item_id, body in ITEMS.items()]
    owners = {**RESPONSE_OWNERS, ORPHAN_RESPONSE: BOB}
    found += [
        _insert(
            "record_owners", kind="response", record_id=rid, principal=agent_principal(owner), owner=json.dumps(owner)
        )
        for rid, owner in owners.items()
    ]
    found.append(
        _insert(
            "record_owners",
            kind="turn",
            record_id=f"turn_{first}",
            principal=agent_principal(BOB),
            owner=json.dumps(BOB),
        )
    )
    return found


async def _responses_at_0024(database: Database) -> list[list[tuple[Any, ...]]]:
    """The responses, their owners and what else they hold at 0024; what stays of them."""
    await database.migrate(BEFORE_RESPONSES, False)
    for row in response_rows():
        await database.query(row)
    before = await _kept(database, RESPONSE_KEPT)
    assert all(before), before
    return before


async def test_responses_get_their_records_with_their_owners_and_keep_their_rows(database: Database) -> None:
    before = await _responses_at_0024(database)
    columns = await _columns_of(database, "responses")
    await _check_kernel(database, assert_responses_moved)
    assert await database.revision() == [HEAD]
    assert await _kept(database, RESPONSE_KEPT) == before  # rows, events, items, turns, other owners: all there
    assert await _columns_of(database, "responses") == columns
    assert await _owner_rows(database, "SELECT record_id FROM record_owners WHERE kind = 'response'") == []
    # Roots, indexed by their conversation (none for a response made in none).
    found = await database.query("SELECT id, parent, parent_seq, k1, k2, k3 FROM records WHERE kind = 'response'")
    assert sorted(found) == sorted((r.response_id, "", None, r.conversation_id, None, None) for r in RESPONSES)
    if database.dialect == "sqlite":
        assert await database.query("PRAGMA foreign_key_check") == []


async def test_the_moved_responses_are_the_records_the_application_writes(database: Database) -> None:
    await _responses_at_0024(database)
    await database.migrate("head", False)
    moved = [await database.query(RESPONSE_RECORDS), await database.query(RESPONSE_TERMS)]
    assert all(moved), moved

    store = database.store()
    await store.open()
    try:
        records = response_heads(store.kernel)
        # The record ``start_response`` writes for each stored response, from the response as the store reads it.
        heads = [head_of(await store.get_response(r.response_id)) for r in RESPONSES]
        assert heads == RESPONSES
        for head in heads:
            assert await records.delete(head.response_id)
        for head in heads:
            await store.kernel.write([records.put(head, owner=response_owner(head.response_id))])
    finally:
        await store.close()
    assert [await database.query(RESPONSE_RECORDS), await database.query(RESPONSE_TERMS)] == moved


async def test_responses_go_down_to_their_owner_rows_and_up_again(database: Database) -> None:
    before = await _responses_at_0024(database)
    await database.migrate("head", False)
    await database.migrate(BEFORE_RESPONSES, True)
    owners = await _owner_rows(
        database, "SELECT record_id, principal, owner FROM record_owners WHERE kind = 'response'"
    )
    assert {row[0]: (row[1], json.loads(row[2])) for row in owners} == {
        rid: (agent_principal(owner), owner) for rid, owner in RESPONSE_OWNERS.items()
    }
    assert await database.query("SELECT id FROM records WHERE kind = 'response'") == []
    assert await database.query("SELECT term FROM record_terms WHERE kind = 'response'") == []
    assert await _kept(database, RESPONSE_KEPT) == before
    await database.migrate("head", False)  # and up again: the same records, owners and terms
    await _check_kernel(database, assert_responses_moved)
    assert await _kept(database, RESPONSE_KEPT) == before


# -- a turn's owner moves into its row; the side table goes (0026) -------------------------------------------------

BEFORE_TURN_OWNERS = "0025_responses_on_kernel"
TURN_OWNERS = {"turn_alice": ALICE, "turn_bob": BOB}
"""Owned turns (``turn_none`` has no owner); an owner row of a turn deleted long ago, and one of an agent (a kind
moved onto the kernel earlier), are left over."""
TURN_KEPT = (
    "SELECT id, turn_id, session_id, agent_id, status, input_messages, overrides FROM turns ORDER BY id",
    "SELECT id, step_id, turn_id, body FROM steps ORDER BY id",
    "SELECT id, session_id, turn_id, body FROM messages ORDER BY id",
)
"""What stays of the turns: their rows, their steps and their messages."""


def turn_owner_rows() -> list[str]:
    """Turns, one step and the messages of one, their owners in ``record_owners`` with two leftovers, as the
    versions at ``0025_responses_on_kernel`` wrote them."""
    stamp = WHEN.isoformat()
    found = [_insert("sessions", session_id="sess_turns", agent_id=None)]
    for turn_id in ("turn_alice", "turn_none", "turn_bob"):
        found.append(
            _insert("turns", turn_id=turn_id, session_id="sess_turns", agent_id=None, status="completed",
                    input_messages="[]", overrides="{}", started_at=stamp)
        )  # fmt: skip
    found.append(_insert("steps", step_id="step_alice", turn_id="turn_alice", step_type="inference", body="{}"))
    found += [
        _insert("messages", session_id="sess_turns", turn_id="turn_alice", role=m.role, body=m.model_dump_json())
        for m in (QUESTION, ANSWER)
    ]
    owners = [("turn", rid, owner) for rid, owner in TURN_OWNERS.items()]
    owners += [("turn", "turn_deleted_long_ago", ALICE), ("agent", "agent_moved_long_ago", BOB)]
    found += [
        _insert("record_owners", kind=kind, record_id=rid, principal=agent_principal(owner), owner=json.dumps(owner))
        for kind, rid, owner in owners
    ]
    return found


async def _turns_at_0025(database: Database) -> list[list[tuple[Any, ...]]]:
    await database.migrate(BEFORE_TURN_OWNERS, False)
    for row in turn_owner_rows():
        await database.query(row)
    before = await _kept(database, TURN_KEPT)
    assert all(before), before
    return before


async def test_turn_owners_move_into_their_rows_and_the_side_table_goes(database: Database) -> None:
    before = await _turns_at_0025(database)
    store = database.store()
    await store.open()
    try:
        found = await store.turn_owners(["turn_alice", "turn_none", "turn_bob", "turn_deleted_long_ago"])
    finally:
        await store.close()
    assert await database.revision() == [HEAD]
    assert found == {rid: Owner.from_json(owner) for rid, owner in TURN_OWNERS.items()}
    assert await _kept(database, TURN_KEPT) == before
    owners = await database.query("SELECT turn_id, owner FROM turns WHERE owner IS NOT NULL ORDER BY turn_id")
    assert {turn_id: json.loads(owner) for turn_id, owner in owners} == TURN_OWNERS
    assert "record_owners" not in await database.tables()


async def test_turn_owners_go_down_to_their_owner_rows_and_up_again(database: Database) -> None:
    before = await _turns_at_0025(database)
    await database.migrate("head", False)
    await database.migrate(BEFORE_TURN_OWNERS, True)
    owners = await database.query("SELECT kind, record_id, principal, owner FROM record_owners ORDER BY record_id")
    assert [(kind, rid, principal, json.loads(owner)) for kind, rid, principal, owner in owners] == [
        ("turn", rid, agent_principal(owner), owner) for rid, owner in sorted(TURN_OWNERS.items())
    ]  # the leftovers went with the table
    assert "owner" not in await _columns_of(database, "turns")
    assert await _kept(database, TURN_KEPT) == before
    await database.migrate("head", False)
    owners = await database.query("SELECT turn_id, owner FROM turns WHERE owner IS NOT NULL ORDER BY turn_id")
    assert {turn_id: json.loads(owner) for turn_id, owner in owners} == TURN_OWNERS
    assert await _kept(database, TURN_KEPT) == before


@pytest.mark.parametrize(
    ("before_move", "rows", "kept"),
    [
        (BEFORE_VECTOR_STORES, sql_rows("sqlite"), CHUNK_INDEX),
        (BEFORE_CONVERSATIONS, conversation_rows(), CONVERSATION_KEPT),
        (BEFORE_SESSIONS, session_rows("sqlite"), SESSION_KEPT),
        (BEFORE_RESPONSES, response_rows(), RESPONSE_KEPT),
        (BEFORE_TURN_OWNERS, turn_owner_rows(), TURN_KEPT),
    ],
    ids=["0021", "0023", "0024", "0025", "0026"],
)
async def test_sqlite_keeps_what_names_a_moved_table_even_with_foreign_keys_enforced(
    tmp_path: Path, before_move: str, rows: list[str], kept: tuple[str, ...]
) -> None:
    path = str(tmp_path / "keys.db")
    engine = sqlite_engine(path)
    with engine.begin() as conn:
        upgrade(conn, before_move)
        for row in rows:
            conn.exec_driver_sql(row)
    engine.dispose()

    @sa.event.listens_for(engine, "connect")
    def _enforce(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA foreign_keys=ON")  # a table copied and dropped would cascade

    def kept_rows(conn: sa.Connection) -> list[list[tuple[Any, ...]]]:
        tables = set(sa.inspect(conn).get_table_names())
        return [[tuple(row) for row in conn.exec_driver_sql(_now(sql, tables, "sqlite"))] for sql in kept]

    try:
        with engine.begin() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            before = kept_rows(conn)
            assert all(before), before
            upgrade(conn, "head")
            assert kept_rows(conn) == before
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), before_move)
            assert kept_rows(conn) == before
            assert conn.exec_driver_sql("PRAGMA foreign_key_check").all() == []
    finally:
        engine.dispose()


async def test_the_kernels_unused_key_table_goes_and_comes_back_empty(database: Database) -> None:
    """Idempotency keys live in ``idempotency_keys`` alone: 0027 drops the kernel's unused ``record_keys``."""
    await database.migrate("head", False)
    assert "record_keys" not in await database.tables()
    assert "idempotency_keys" in await database.tables()
    await database.migrate("0026_turn_owners_in_turns", True)
    assert await database.query("SELECT owner_key, key, expires_at FROM record_keys") == []
    await database.migrate("head", False)
    assert "record_keys" not in await database.tables()
    assert await database.revision() == [HEAD]


# -- items move into the kernel's records, under their containers; ``items`` goes (0028) ---------------------------

BEFORE_ITEMS = "0027_drop_record_keys"
CONTAINERS = [("conversation", "conv_talk"), ("response", "resp_in"), ("fork", "forkhist_held"),
              ("fork", "conv_fork"), ("conversation", "conv_fork")]  # fmt: skip
"""The records items stand under, in creation order: a forked conversation's lineage comes before it, same id."""
ITEM_ROWS = [("conv_talk", "msg_zz"), ("resp_in", "msg_zz"), ("conv_talk", "msg_aa"), ("forkhist_held", "msg_h"),
             ("conv_gone", "msg_lost"), ("conv_fork", "msg_f")]  # fmt: skip
"""Items in the order they were added, one id in two containers; ``conv_gone``'s container no record holds."""


def _item_body(container: str, item_id: str) -> dict[str, Any]:
    text = {"type": "input_text", "text": f"{item_id} of {container}"}
    return {"type": "message", "id": item_id, "role": "user", "content": [text]}


def item_rows() -> list[str]:
    """The containers' records, one more record (deleted by :func:`_items_at_0027`) and the items, as 0027 wrote
    them."""
    found = [
        _insert("records", kind=kind, id=rid, parent="", body="{}", at=float(RESPONSE.created_at + n))
        for n, (kind, rid) in enumerate(CONTAINERS)
    ]
    found.append(_insert("records", kind="model", id="deleted_last", parent="", body="{}", at=0.0))
    found += [
        _insert("items", item_id=item_id, owner=owner, body=json.dumps(_item_body(owner, item_id)))
        for owner, item_id in ITEM_ROWS
    ]
    return found


def _expected_items() -> dict[str, list[Item]]:
    expected: dict[str, list[Item]] = {}
    for owner, item_id in ITEM_ROWS:
        if owner != "conv_gone":
            expected.setdefault(owner, []).append(ITEM.validate_python(_item_body(owner, item_id)))
    return expected


async def _items_at_0027(database: Database) -> tuple[list[tuple[Any, ...]], int]:
    """The items at 0027, and the number of the last record drawn, deleted since."""
    await database.migrate(BEFORE_ITEMS, False)
    for row in item_rows():
        await database.query(row)
    ((drawn,),) = await database.query("SELECT seq FROM records WHERE id = 'deleted_last'")
    await database.query("DELETE FROM records WHERE id = 'deleted_last'")
    (before,) = await _kept(database, (ITEMS_NOW,))
    assert len(before) == len(ITEM_ROWS)
    return before, int(drawn)


async def test_items_move_into_the_kernel_under_their_containers(database: Database) -> None:
    _, drawn = await _items_at_0027(database)
    await database.migrate("head", False)
    first = await database.query("SELECT min(seq) FROM records WHERE kind = 'item'")
    assert first[0][0] > drawn  # a number drawn once is not given again
    store = database.store()
    await store.open()
    try:
        owners = [owner for owner, _ in ITEM_ROWS]
        assert await store.items_of(owners) == _expected_items()  # the orphan's went with the table
        page = await store.list_items("conv_talk", "msg_zz", 10, "asc")
        assert [item.id for item in page.items] == ["msg_aa"]
        new = ITEM.validate_python(_item_body("conv_talk", "msg_new"))
        await store.add_items("conv_talk", [new])  # numbered after every moved record
        assert [item.id for item in await store.all_items("conv_talk")] == ["msg_zz", "msg_aa", "msg_new"]
        await store.kernel.write([ops.Delete(CONVERSATION, "conv_talk")])  # its items go with it
        assert await store.all_items("conv_talk") == []
        assert await store.all_items("resp_in") == _expected_items()["resp_in"]
    finally:
        await store.close()
    assert await database.revision() == [HEAD]
    assert "items" not in await database.tables()
    moved = await database.query("SELECT seq, parent_seq, owner, at FROM records WHERE kind = 'item' ORDER BY seq")
    assert len(moved) == len(ITEM_ROWS) - 1 - 2  # the orphan never moved; conv_talk's two went with it
    containers = {seq: (kind, rid, at) for seq, kind, rid, at in await database.query(
        "SELECT seq, kind, id, at FROM records WHERE kind <> 'item'"
    )}  # fmt: skip
    parents = [containers[parent] for _, parent, _, _ in moved]
    # Under the earliest record of their container's id (a fork's lineage before its conversation), dated by it.
    assert [(kind, rid) for kind, rid, _ in parents] == [("response", "resp_in"), ("fork", "forkhist_held"),
                                                         ("fork", "conv_fork")]  # fmt: skip
    assert [at for *_, at in moved] == [at for *_, at in parents]
    assert {owner for _, _, owner, _ in moved} == {None}
    terms = await database.query("SELECT term FROM record_terms WHERE kind = 'item'")
    assert terms == [("-",)] * len(moved)  # the server's own records' one term, as the kernel writes it
    if database.dialect == "sqlite":
        assert await database.query("PRAGMA foreign_key_check") == []


async def test_items_go_down_to_their_table_and_up_again(database: Database) -> None:
    before, _ = await _items_at_0027(database)
    await database.migrate("head", False)
    await database.migrate(BEFORE_ITEMS, True)
    assert await _kept(database, (ITEMS_NOW,)) == [[row for row in before if row[0] != "conv_gone"]]
    assert await database.query("SELECT seq FROM records WHERE kind = 'item'") == []
    assert await database.query("SELECT seq FROM record_terms WHERE kind = 'item'") == []
    later = _item_body("conv_talk", "msg_later")  # added after the way down: its row's id is drawn after theirs
    await database.query(_insert("items", item_id="msg_later", owner="conv_talk", body=json.dumps(later)))
    await database.migrate("head", False)
    store = database.store()
    await store.open()
    try:
        expected = _expected_items()
        expected["conv_talk"].append(ITEM.validate_python(later))
        assert await store.items_of(list(expected)) == expected
    finally:
        await store.close()


# -- a response's stored events move into its record's log; ``response_events`` goes (0029) -----------------------

BEFORE_EVENTS = "0028_items_on_kernel"
RECORDLESS = RESPONSES[1].response_id
"""A response whose record a test deletes: its events belong to nothing the API reaches."""


async def _events_at_0028(database: Database) -> list[tuple[Any, ...]]:
    """The responses of :func:`response_rows` at 0028, the first's events and one recordless response's."""
    await database.migrate(BEFORE_RESPONSES, False)
    for row in response_rows():
        await database.query(row)
    await database.migrate(BEFORE_EVENTS, False)
    await database.query(f"DELETE FROM records WHERE kind = 'response' AND id = '{RECORDLESS}'")  # noqa: S608
    await database.query(_insert("response_events", response_id=RECORDLESS, seq=0, body=RESPONSE_DATA[0]))
    (before,) = await _kept(database, (EVENTS_NOW,))
    assert len(before) == len(RESPONSE_DATA) + 1
    return before


async def test_response_events_move_into_their_records_logs(database: Database) -> None:
    await _events_at_0028(database)
    first = RESPONSES[0].response_id
    store = database.store()
    await store.open()
    try:
        stored = [StoredEvent(seq, data) for seq, data in enumerate(RESPONSE_DATA)]
        assert await store.events_after(first, -1) == stored
        assert await store.events_after(first, 0) == stored[1:]
        assert await store.events_after(RECORDLESS, -1) == []
        assert "response_events" not in await database.tables()
        await store.delete_response(first)  # its log goes with its record
        assert await store.events_after(first, -1) == []
    finally:
        await store.close()
    assert await database.revision() == [HEAD]
    assert await database.query("SELECT rec_seq FROM record_logs WHERE channel = 'events'") == []


async def test_response_events_go_down_to_their_table_and_up_again(database: Database) -> None:
    before = await _events_at_0028(database)
    await database.migrate("head", False)
    # A response's record with a log but no row (its row deleted by an older version): its events have no row to
    # go back under, whose foreign key the table has again.
    await database.query(_insert("records", kind="response", id="resp_rowless", parent="", body="{}", at=1.0))
    ((rowless,),) = await database.query("SELECT seq FROM records WHERE id = 'resp_rowless'")
    await database.query(_insert("record_logs", rec_seq=rowless, channel="events", n=0, body="{}"))
    await database.migrate(BEFORE_EVENTS, True)
    assert await _kept(database, (EVENTS_NOW,)) == [[row for row in before if row[0] != RECORDLESS]]
    assert await database.query("SELECT rec_seq FROM record_logs WHERE channel = 'events'") == []
    await database.migrate("head", False)
    (again,) = await _kept(database, (EVENTS_NOW,))
    assert again == [row for row in before if row[0] != RECORDLESS]


# -- conversations' anchors go; a conversation is its record alone (0030) ------------------------------------------

BEFORE_ANCHORS = "0029_response_events_in_logs"


async def _anchors_at_0029(database: Database) -> list[tuple[Any, ...]]:
    """Two conversations (record and anchor) in one session, as the versions at 0029 wrote them."""
    await database.migrate(BEFORE_ANCHORS, False)
    rows = [_insert("sessions", session_id="sess_c", agent_id=None)]
    rows += [row for c in ("conv_b", "conv_a") for row in _conversation(c, "sess_c")]
    for row in rows:
        await database.query(row)
    (before,) = await _kept(database, (ANCHORS_NOW,))
    assert before == [("conv_b", "sess_c"), ("conv_a", "sess_c")]
    return before


async def test_conversations_anchors_go_and_responses_start_on_their_records(database: Database) -> None:
    before = await _anchors_at_0029(database)
    store = database.store()
    await store.open()
    try:
        assert "conversations" not in await database.tables()
        assert await _kept(database, (ANCHORS_NOW,)) == [before]
        conversation = ConversationRecord("conv_a", "sess_c", {}, 1)
        start = response_start("q", conversation)
        await store.start_response(start)  # the start holds the conversation's record
        await store.delete_conversation("conv_b")
        with pytest.raises(NotFoundError, match="conversation 'conv_b' not found"):
            await store.start_response(response_start("q", ConversationRecord("conv_b", "sess_c", {}, 1)))
    finally:
        await store.close()


async def test_conversations_anchors_come_back_from_their_records_and_go_again(database: Database) -> None:
    before = await _anchors_at_0029(database)
    await database.migrate("head", False)
    # A conversation whose session row is gone has no anchor to come back: its foreign key would refuse it.
    sessionless = {"conversation_id": "conv_x", "session_id": "sess_gone", "metadata": {}, "created_at": 1}
    await database.query(_insert("records", kind="conversation", id="conv_x", parent="", body=json.dumps(sessionless),
                                 at=1.0))  # fmt: skip
    await database.migrate(BEFORE_ANCHORS, True)
    assert await database.query("SELECT conversation_id, session_id FROM conversations ORDER BY id") == before
    await database.migrate("head", False)
    assert "conversations" not in await database.tables()
    assert await _kept(database, (ANCHORS_NOW,)) == [[*before, ("conv_x", "sess_gone")]]


# -- file batches move into the kernel's records under their stores; ``file_batches`` goes (0031) ------------------

BEFORE_BATCHES = "0030_drop_conversation_anchors"
RECORDLESS_STORE = "vs_recordless"
"""A store whose row an older version left without its record: its batch belongs to nothing the API reaches."""
BATCHES = [
    FileBatchRecord(BATCH, INDEXED, STORES_WHEN + 10),
    FileBatchRecord("vsfb_alpha", "vs_alpha", STORES_WHEN + 70, cancelled=True),
]


async def _batches_at_0030(database: Database) -> list[tuple[Any, ...]]:
    """The stores at 0030 with :data:`BATCHES` and a recordless store's batch, as 0030 kept them; the batches."""
    await _stores_at_0020(database)  # the first store's batch among them
    await database.migrate(BEFORE_BATCHES, False)
    rows = [
        _insert("file_batches", batch_id="vsfb_alpha", vector_store_id="vs_alpha", created_at=STORES_WHEN + 70,
                cancelled=True),
        _insert("vector_stores", vector_store_id=RECORDLESS_STORE, embedding_dimension=3, version=1, removals_from=1),
        _insert("file_batches", batch_id="vsfb_lost", vector_store_id=RECORDLESS_STORE, created_at=STORES_WHEN,
                cancelled=False),
    ]  # fmt: skip
    for row in rows:
        await database.query(row)
    (before,) = await _kept(database, (BATCHES_NOW,))
    assert [row[0] for row in before] == ["vsfb_alpha", "vsfb_lost", BATCH]  # by id
    return before


async def test_file_batches_move_into_the_kernel_under_their_stores(database: Database) -> None:
    before = await _batches_at_0030(database)
    store = database.store()
    await store.open()
    try:
        assert "file_batches" not in await database.tables()
        for batch in BATCHES:
            assert await file_batch(store.kernel, batch.vector_store_id, batch.batch_id) == batch
        with pytest.raises(NotFoundError):  # under its own store only
            await file_batch(store.kernel, "vs_alpha", BATCH)
        await store.cancel_file_batch(INDEXED, BATCH)
        assert (await file_batch(store.kernel, INDEXED, BATCH)).cancelled
        await store.delete_vector_store("vs_alpha")  # its batch goes with its record
        with pytest.raises(NotFoundError):
            await file_batch(store.kernel, "vs_alpha", "vsfb_alpha")
    finally:
        await store.close()
    assert await database.revision() == [HEAD]
    moved = [row for row in before if row[0] != "vsfb_lost"]  # its store has no record to stand under
    assert await _kept(database, (BATCHES_NOW,)) == [[(*moved[1][:3], 1)]]  # the cancelled one
    terms = await database.query("SELECT term FROM record_terms WHERE kind = 'file_batch'")
    assert terms == [("-",)]  # the server's own records' one term, as the kernel writes it
    if database.dialect == "sqlite":
        assert await database.query("PRAGMA foreign_key_check") == []


async def test_file_batches_go_down_to_their_table_and_up_again(database: Database) -> None:
    before = await _batches_at_0030(database)
    await database.migrate("head", False)
    moved = [row for row in before if row[0] != "vsfb_lost"]
    assert await _kept(database, (BATCHES_NOW,)) == [moved]
    await database.migrate(BEFORE_BATCHES, True)
    assert await _kept(database, (BATCHES_NOW,)) == [moved]
    assert await database.query("SELECT seq FROM records WHERE kind = 'file_batch'") == []
    assert await database.query("SELECT seq FROM record_terms WHERE kind = 'file_batch'") == []
    await database.migrate("head", False)
    await _check_kernel(database, _assert_batches)
    assert await _kept(database, (BATCHES_NOW,)) == [moved]


async def _assert_batches(kernel: Kernel) -> None:
    for batch in BATCHES:
        assert await file_batch(kernel, batch.vector_store_id, batch.batch_id) == batch
