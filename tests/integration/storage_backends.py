"""Opening every storage backend for the contract suite, each on a fresh, private database.

SQLite and PostgreSQL start from a schema migrated once per test process (a
copied file; an emptied schema): migrating for each test cost most of their time.

Add a backend with one line in ``BACKENDS`` (and its opener below).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, NoReturn, cast

import pytest

from ferryman.storage.base import Store
from ferryman.storage.knowledge import VectorStoreRecord
from ferryman.storage.sql.sqlite import SqliteDriver, SqliteStore
from inprocess import migrated_sqlite

# With a libpq query parameter, as managed databases' URLs have (``sslmode=require``); "disable" also keeps
# asyncpg's TLS probe out: a probe cut short left a future failing with "unexpected connection_lost() call"
# that nothing awaited, and the test runner raised it in whichever test ran.
POSTGRES_URL = os.environ.get("FERRYMAN_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test?sslmode=disable")
REDIS_URL = os.environ.get("FERRYMAN_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
CONNECT_TIMEOUT = 5.0

# Whether a server (by URL) answered (None) or why not, probed once per process so
# that a dead server costs one timeout, not one per test.
_unreachable: dict[str, str | None] = {}


def unavailable(reason: str) -> NoReturn:
    """Skip a backend that cannot run here, except under CI, where it must run: fail there."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: a backend may not be skipped)", pytrace=False)
    pytest.skip(reason)


async def require_server(name: str, url: str, env_var: str, probe: Callable[[], Awaitable[None]]) -> None:
    """Probe a server once per process; when it does not answer, skip (or, under CI, fail) the test."""
    if url not in _unreachable:
        try:
            await probe()
        except Exception as exc:  # whatever stops the connection, the backend cannot be tested
            _unreachable[url] = repr(exc)
        else:
            _unreachable[url] = None
    down = _unreachable[url]
    if down is not None:
        unavailable(f"{name} is unreachable at {url} (set {env_var}): {down}")


@asynccontextmanager
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    """A SQLite store on a new file (at head: the template copied, see ``migrated_sqlite``)."""
    store = SqliteStore(migrated_sqlite(tmp_path / "contract.db"))
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def postgres_store(tmp_path: Path) -> AsyncIterator[Store]:
    """A PostgreSQL store on an empty schema at head (this process's, dropped at exit)."""
    try:
        import asyncpg

        from ferryman.storage.sql.postgres import PostgresStore
    except ImportError as exc:
        missing = str(exc)
    else:
        missing = ""
    if missing:
        unavailable(f"the PostgreSQL backend cannot be imported: {missing}")

    async def probe() -> None:
        connection = await asyncpg.connect(POSTGRES_URL, timeout=CONNECT_TIMEOUT)
        await connection.close()

    await require_server("PostgreSQL", POSTGRES_URL, "FERRYMAN_TEST_POSTGRES_URL", probe)
    schema = await _emptied_schema(asyncpg)
    store = PostgresStore(POSTGRES_URL, schema=schema)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


# This test process's schema: its first store migrates it; each later one finds it emptied.
_schema: list[str] = []


async def _emptied_schema(asyncpg: Any) -> str:
    """This process's contract schema, every table emptied (a fresh store, without migrating each time)."""
    if not _schema:
        _schema.append(f"contract_{uuid.uuid4().hex[:12]}")
        atexit.register(lambda: asyncio.run(_drop_schema(asyncpg, _schema[0])))
        return _schema[0]
    admin = await asyncpg.connect(POSTGRES_URL, timeout=CONNECT_TIMEOUT)
    try:
        listed = "SELECT tablename FROM pg_tables WHERE schemaname = $1 AND tablename <> 'alembic_version'"
        tables = [f'"{_schema[0]}"."{row[0]}"' for row in await admin.fetch(listed, _schema[0])]
        sequences = await admin.fetch("SELECT sequencename FROM pg_sequences WHERE schemaname = $1", _schema[0])
        # DELETE, with foreign keys unchecked, is far quicker than TRUNCATE on tables this small.
        emptying = [f"DELETE FROM {table}" for table in tables]
        restarts = [f'ALTER SEQUENCE "{_schema[0]}"."{row[0]}" RESTART' for row in sequences]
        await admin.execute(
            ";".join(["SET session_replication_role = replica", *emptying, *restarts, "RESET session_replication_role"])
        )
    finally:
        await admin.close()
    return _schema[0]


async def _drop_schema(asyncpg: Any, schema: str) -> None:
    admin = await asyncpg.connect(POSTGRES_URL, timeout=CONNECT_TIMEOUT)
    try:
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await admin.close()


@asynccontextmanager
async def redis_store(tmp_path: Path) -> AsyncIterator[Store]:
    """A Redis store under a new key prefix, whose keys are deleted afterwards."""
    try:
        from redis.asyncio import Redis

        from ferryman.storage.redis.store import RedisStore
    except ImportError as exc:
        missing = str(exc)
    else:
        missing = ""
    if missing:
        unavailable(f"the Redis backend cannot be imported: {missing}")

    async def probe() -> None:
        client = Redis.from_url(REDIS_URL, socket_connect_timeout=CONNECT_TIMEOUT)
        try:
            await client.ping()
        finally:
            await client.aclose()

    await require_server("Redis", REDIS_URL, "FERRYMAN_TEST_REDIS_URL", probe)
    prefix = f"contract_{uuid.uuid4().hex[:12]}:"
    store = RedisStore(REDIS_URL, prefix=prefix)
    try:
        await store.open()
        try:
            yield store
        finally:
            await store.close()
    finally:
        admin = Redis.from_url(REDIS_URL, socket_connect_timeout=CONNECT_TIMEOUT)
        try:
            keys = [key async for key in admin.scan_iter(match=f"{prefix}*", count=1000)]
            if keys:
                await admin.delete(*keys)
        finally:
            await admin.aclose()


@asynccontextmanager
async def unopened_store(backend: str, tmp_path: Path) -> AsyncIterator[Store]:
    """A store of ``backend`` on a fresh, migrated database that its user opens itself (an app, say).

    The database (file, schema or key prefix) is prepared and cleaned up as by ``BACKENDS``;
    the store yielded is a second, unopened one over it.
    """
    if backend == "sqlite":
        yield SqliteStore(migrated_sqlite(tmp_path / "unopened.db"))
        return
    if backend == "postgres":
        from ferryman.storage.sql.postgres import PostgresStore

        async with postgres_store(tmp_path) as migrated:
            yield PostgresStore(POSTGRES_URL, schema=migrated._db._schema)  # type: ignore[attr-defined]
        return
    from ferryman.storage.redis.store import RedisStore

    async with redis_store(tmp_path) as prepared:
        yield RedisStore(REDIS_URL, prefix=cast(RedisStore, prepared)._keys.prefix)


@asynccontextmanager
async def twin_store(store: Store) -> AsyncIterator[Store]:
    """A second store, opened, over the same database as ``store`` (another replica's)."""
    twin: Store
    if isinstance(store, SqliteStore):
        twin = SqliteStore(cast(SqliteDriver, store._db).path)
    elif type(store).__name__ == "PostgresStore":
        from ferryman.storage.sql.postgres import PostgresStore

        twin = PostgresStore(POSTGRES_URL, schema=store._db._schema)  # type: ignore[attr-defined]
    else:
        from ferryman.storage.redis.store import RedisStore

        twin = RedisStore(REDIS_URL, prefix=cast(RedisStore, store)._keys.prefix)
    await twin.open()
    try:
        yield twin
    finally:
        await twin.close()


Opener = Callable[[Path], AbstractAsyncContextManager[Store]]

BACKENDS: dict[str, Opener] = {
    "sqlite": sqlite_store,
    "postgres": postgres_store,
    "redis": redis_store,
}


def vector_store_record(vector_store_id: str, dimension: int) -> VectorStoreRecord:
    """A vector store of embeddings of ``dimension``, named after its id."""
    return VectorStoreRecord(
        vector_store_id=vector_store_id,
        name=vector_store_id,
        created_at=1,
        embedding_model="m",
        embedding_dimension=dimension,
        chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}},
        last_active_at=1,
    )
