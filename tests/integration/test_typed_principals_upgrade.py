"""Owners stored under the untyped principal strings of earlier versions are typed in place, on every backend.

The data is what ``a461441`` (SQL revision ``0008_shields``, Redis layout 2) wrote:
``key:NAME`` was the API key ``NAME``, anything else a token's subject, in record
owners and in idempotency keys' owners alike.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import sqlalchemy as sa
from alembic import command
from redis.asyncio import Redis
from replicas import redis_database
from storage_backends import CONNECT_TIMEOUT, POSTGRES_URL, postgres_store

from ferryman.auth.policy import AccessPolicy
from ferryman.auth.principal import Principal, PrincipalKind
from ferryman.redis_url import split_prefix
from ferryman.services.acting_owner import stored_principal
from ferryman.services.record_guard import owners_of
from ferryman.storage.base import IdempotencyRecord, Store, TurnRecord
from ferryman.storage.kernel.model import Owner
from ferryman.storage.redis.idempotency import record_id
from ferryman.storage.redis.store import RedisStore
from ferryman.storage.redis.store_keys import SCHEMA, SEQ, Keys
from ferryman.storage.redis.upgrades import runner as redis_upgrade
from ferryman.storage.redis.upgrades.runner import SCHEMA_VERSION
from ferryman.storage.sql.migrate import alembic_config, sqlite_engine, upgrade_postgres, upgrade_sqlite
from ferryman.storage.sql.postgres import PostgresStore
from ferryman.storage.sql.sqlite import SqliteStore

pytestmark = pytest.mark.anyio

MAIN = "0008_shields"
AGENT, SESSION = "agent_typed", "sess_typed"
"""The agent and session of the turns whose owners are typed."""
NOW = datetime.now(UTC)
API_KEY, SUBJECT = PrincipalKind.API_KEY, PrincipalKind.SUBJECT

# (kind of record, record id, owner id as stored, its attributes) -> the owner it is now. Turns: their owners were
# in the side table until revision 0026 (layout 16) moved them into the turns' own rows (hashes), dropping those
# of turns that are gone, so these turns exist (every other kind's owners moved into the kernel's records earlier).
OWNERS = {
    ("turn", "agent_key", "key:alice", (("roles", ("dev",)),)): Principal(API_KEY, "alice", {"roles": ("dev",)}),
    ("turn", "turn-sub", "alice", (("teams", ("red",)),)): Principal(SUBJECT, "alice", {"teams": ("red",)}),
}
# More owners than one batch of the conversion holds.
BULK = {("turn", f"agent_bulk_{i:04}", f"user-{i}", ()): Principal(SUBJECT, f"user-{i}") for i in range(1100)}
# An idempotency key's owner as stored -> its token; the owner it has now -> the token it must find.
IDEMPOTENCY_OWNERS = {"key:alice": "t-key", "bob": "t-bob", "sub:bob": "t-sub-bob", "": "t-anyone"}
NOW_OWNED = {"key:alice": "t-key", "sub:bob": "t-bob", "sub:sub:bob": "t-sub-bob", "": "t-anyone", "bob": None}


def _owner_json(stored_id: str, attributes: tuple[tuple[str, tuple[str, ...]], ...]) -> str:
    return json.dumps({"id": stored_id, "attributes": {kind: list(values) for kind, values in attributes}})


async def _assert_typed(store: Store) -> None:
    for (kind, record_id_, _, _), owner in (OWNERS | BULK).items():
        assert stored_principal((await owners_of(store, kind, [record_id_]))[record_id_]) == owner
    # The policy now tells the key from a token whose subject is its old principal string.
    key_owned = OWNERS[("turn", "agent_key", "key:alice", (("roles", ("dev",)),))]
    policy = AccessPolicy()
    assert policy.allows(Principal(API_KEY, "alice"), "read", "agent::agent_key", key_owned)
    assert not policy.allows(Principal(SUBJECT, "key:alice"), "read", "agent::agent_key", key_owned)
    for qualified, token in NOW_OWNED.items():
        claim = IdempotencyRecord(qualified, "k", "fresh", "fp", NOW, NOW + timedelta(hours=1))
        held = await store.claim_idempotency_key(claim, NOW)
        assert (held.token if held else None) == token, qualified


@dataclass
class AtMain:
    """A database as this version's predecessor left it: fill it, then open this version's store on it."""

    insert: Callable[[str, Sequence[Sequence[Any]]], Awaitable[None]]
    store: Callable[[], Store]
    sqlite: bool


@pytest.fixture(params=["sqlite", "postgres"])
async def at_main(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AtMain]:
    if request.param == "sqlite":
        path = tmp_path / "main.db"
        await asyncio.to_thread(upgrade_sqlite, str(path), MAIN)

        yield AtMain(_sqlite_insert(path), lambda: SqliteStore(str(path)), True)
        return
    async with postgres_store(tmp_path):  # skips (or, under CI, fails) when PostgreSQL is unreachable
        pass
    schema = f"typed_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(POSTGRES_URL, timeout=CONNECT_TIMEOUT)
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    await admin.execute(f'SET search_path TO "{schema}"')
    await upgrade_postgres(POSTGRES_URL, schema, MAIN)

    async def insert_postgres(sql: str, rows: Sequence[Sequence[Any]]) -> None:
        numbers = itertools.count(1)
        await admin.executemany(re.sub(r"\$", lambda _: f"${next(numbers)}", sql), rows)

    try:
        yield AtMain(insert_postgres, lambda: PostgresStore(POSTGRES_URL, schema=schema), False)
    finally:
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()


async def _fill(database: AtMain) -> None:
    owners = [(kind, rid, stored, _owner_json(stored, attributes)) for kind, rid, stored, attributes in OWNERS | BULK]
    await database.insert("INSERT INTO record_owners (kind, record_id, principal, owner) VALUES ($, $, $, $)", owners)
    stamp: object = NOW.isoformat() if database.sqlite else NOW
    await database.insert("INSERT INTO agents (agent_id, config, created_at) VALUES ($, $, $)", [(AGENT, "{}", stamp)])
    await database.insert(
        "INSERT INTO sessions (session_id, agent_id, session_name, started_at) VALUES ($, $, $, $)",
        [(SESSION, AGENT, "s", stamp)],
    )
    await database.insert(
        "INSERT INTO turns (turn_id, session_id, agent_id, status, input_messages, overrides, started_at) "
        "VALUES ($, $, $, $, $, $, $)",
        [(rid, SESSION, AGENT, "completed", "[]", "{}", stamp) for _, rid, _, _ in OWNERS | BULK],
    )
    times: tuple[object, object] = (NOW, NOW + timedelta(days=1))
    if database.sqlite:
        times = (NOW.timestamp(), (NOW + timedelta(days=1)).timestamp())
    keys = [(owner, "k", token, "fp", '{"status": 200}', *times) for owner, token in IDEMPOTENCY_OWNERS.items()]
    await database.insert(
        "INSERT INTO idempotency_keys (owner, idempotency_key, token, fingerprint, result, created_at, expires_at) "
        "VALUES ($, $, $, $, $, $, $)",
        keys,
    )


async def test_owners_stored_by_the_schema_on_main_are_typed_in_place(at_main: AtMain) -> None:
    await _fill(at_main)
    store = at_main.store()
    await store.open()
    try:
        await _assert_typed(store)
    finally:
        await store.close()


async def test_going_down_again_gives_the_old_strings_and_no_subject_the_keys_name(tmp_path: Path) -> None:
    path = tmp_path / "down.db"
    await asyncio.to_thread(upgrade_sqlite, str(path), MAIN)
    await _fill(AtMain(_sqlite_insert(path), lambda: SqliteStore(str(path)), True))
    store = SqliteStore(str(path))
    await store.open()
    # A subject whose id reads as an old API key string: going down must not hand its records to the key.
    mallory_turn = TurnRecord("agent_mallory", SESSION, AGENT, "completed", [], NOW)
    await store.start_turn(mallory_turn, [], load_history=False, owner=Owner(SUBJECT.value, "key:alice"))
    mallory = IdempotencyRecord("sub:key:alice", "k2", "t-mallory", "fp", NOW, NOW + timedelta(hours=1))
    assert await store.claim_idempotency_key(mallory, NOW) is None
    await store.close()

    engine = sqlite_engine(str(path))
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0009_blocked_text")
            found = conn.execute(sa.text("SELECT record_id, principal, owner FROM record_owners"))
            owners = {row[0]: (row[1], row[2]) for row in found}
            keys: dict[str, str] = dict(conn.execute(sa.text("SELECT owner, token FROM idempotency_keys")).all())
    finally:
        engine.dispose()
    assert "agent_mallory" not in owners
    for kind, rid, stored, attributes in OWNERS:
        assert owners[rid] == (stored, _owner_json(stored, attributes)), (kind, rid)
    assert keys == IDEMPOTENCY_OWNERS


def _sqlite_insert(path: Path) -> Callable[[str, Sequence[Sequence[Any]]], Awaitable[None]]:
    async def insert(sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with sqlite3.connect(path) as conn:
            conn.executemany(sql.replace("$", "?"), rows)

    return insert


@pytest.fixture()
def deployment() -> Iterator[tuple[str, str]]:
    """The test Redis URL and a fresh key prefix, its keys deleted afterwards."""
    with redis_database() as prefixed:
        yield split_prefix(prefixed)


async def _as_main_left_it(url: str, prefix: str, renamed_already: bool = False) -> Redis:
    """Redis data of layout 2: untyped owners and idempotency keys (optionally one renamed by an upgrade that
    died midway); returns an admin client."""
    admin = Redis.from_url(url, decode_responses=True)
    keys = Keys(prefix)
    await admin.set(keys.global_(SCHEMA), 2)
    await admin.set(keys.global_(SEQ), len(OWNERS | BULK))  # the turns drew their numbers
    for kind, rid, stored, attributes in OWNERS | BULK:
        await admin.hset(keys.of("owners", kind), rid, _owner_json(stored, attributes))
        await admin.hset(keys.of("turn", rid), mapping={"session_id": SESSION, "status": "completed"})
    expires = (NOW + timedelta(days=1)).timestamp()
    for owner, token in IDEMPOTENCY_OWNERS.items():
        name = keys.of("idempotency", record_id(owner, "k"))
        if renamed_already and owner == "sub:bob":  # the longest owner goes first
            name = keys.of("idempotency", record_id("sub:sub:bob", "k"))
            await admin.sadd(keys.global_("schema_renamed"), name)
        fields = {
            "token": token,
            "fingerprint": "fp",
            "created_at": NOW.timestamp(),
            "expires_at": expires,
        }
        await admin.hset(name, mapping=fields | {"result": '{"status": 200}'})
        await admin.expire(name, 86400)
    return admin


@pytest.mark.parametrize("renamed_already", [False, True], ids=["at once", "finishing one that died"])
async def test_redis_owners_of_layout_2_are_typed_in_place(deployment: tuple[str, str], renamed_already: bool) -> None:
    url, prefix = deployment
    admin = await _as_main_left_it(url, prefix, renamed_already)
    store = RedisStore(url, prefix)
    await store.open()
    try:
        await _assert_typed(store)
        keys = Keys(prefix)
        assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)
        assert not await admin.exists(keys.global_("schema_renamed"))
        assert 0 < await admin.ttl(keys.of("idempotency", record_id("sub:sub:bob", "k"))) <= 86400
    finally:
        await store.close()
        await admin.aclose()


async def test_a_redis_upgrade_scanning_many_idempotency_keys_keeps_its_lock(
    deployment: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Thousands of keys take longer to scan than the (shortened) lock lasts: the scan must renew it,
    # or another replica would convert the same keys at once (and rename a renamed key again).
    monkeypatch.setattr(redis_upgrade, "LOCK_SECONDS", 1.0)
    url, prefix = deployment
    keys = Keys(prefix)
    admin = Redis.from_url(url, decode_responses=True)
    try:
        await admin.set(keys.global_(SCHEMA), 2)
        async with admin.pipeline(transaction=False) as pipe:
            for owner in [*(f"key:k{i}" for i in range(8000)), "bob"]:
                name = keys.of("idempotency", record_id(owner, "k"))
                pipe.hset(name, mapping={"token": f"t-{owner}", "fingerprint": "fp", "created_at": NOW.timestamp()})
                pipe.expire(name, 600)
            await pipe.execute()
        store = RedisStore(url, prefix)
        await store.open()
        await store.close()
        assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)
        assert await admin.hget(keys.of("idempotency", record_id("sub:bob", "k")), "token") == "t-bob"
    finally:
        await admin.aclose()
