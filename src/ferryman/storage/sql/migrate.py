"""Bringing a SQL schema up to date with Alembic at store open; databases of the earlier runner are adopted.

The earlier, home-made runner recorded its versions in ``schema_migrations``.
Such a database (without ``alembic_version``) is stamped with the revision its
last version matches, then upgraded like any other, in the same transaction.

A database already at :data:`HEAD` is opened without Alembic: one read of its
version, and Alembic with its revisions (about 10 MiB of a server's memory, for
good) is never imported.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from ferryman.errors import ConfigurationError

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.ext.asyncio import AsyncEngine


# The earlier runner's last version -> the revision whose schema it had built.
LEGACY: dict[str, dict[int, str]] = {
    "sqlite": {5: "0001_baseline", 6: "0002_idempotency_keys"},
    "postgresql": {3: "0001_baseline", 4: "0002_idempotency_keys"},
}
# Every replica migrates at start-up; this advisory lock makes them take turns.
MIGRATION_LOCK = 0x66657272  # "ferr"
_SCRIPTS = Path(__file__).parent / "migrations"
HEAD = max(path.stem for path in (_SCRIPTS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))
"""The newest revision: each revision's id is its file's name, numbered in order (``tests/unit/
test_migration_head.py`` holds it to Alembic's own head)."""
_VERSION = "SELECT version_num FROM alembic_version"


def legacy_revision(conn: sa.Connection) -> str | None:
    """The revision to stamp a database of the earlier runner with, or None for any other database.

    Raises:
        ConfigurationError: the database is at a version of the earlier runner too old to adopt.
    """
    tables = set(sa.inspect(conn).get_table_names())
    if "alembic_version" in tables or "schema_migrations" not in tables:
        return None
    version = conn.execute(sa.text("SELECT max(version) FROM schema_migrations")).scalar()
    known = LEGACY[conn.dialect.name]
    if version not in known:
        raise ConfigurationError(
            f"the database is at schema version {version} of an early ferryman, too old to upgrade here "
            f"(versions {min(known)}-{max(known)} are): open it once with a release from before Alembic first"
        )
    return known[version]


def alembic_config(conn: sa.Connection) -> Config:
    """Alembic's configuration for running commands (``alembic.command``) on ``conn``."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.attributes["connection"] = conn
    return config


def upgrade(conn: sa.Connection, target: str = "head") -> None:
    """Adopt a database of the earlier runner, then upgrade to ``target``, all in ``conn``'s transaction."""
    from alembic import command

    config = alembic_config(conn)
    legacy = legacy_revision(conn)
    if legacy is not None:
        command.stamp(config, legacy)
        conn.execute(sa.text("DROP TABLE schema_migrations"))
    command.upgrade(config, target)


def sqlite_engine(path: str) -> sa.Engine:
    """An engine on a SQLite file whose transactions cover DDL and lock out other writers from the start."""
    # A URL object, not text: a '?' or '#' in the path would start a query or a fragment of a URL's text.
    engine = sa.create_engine(sa.engine.URL.create("sqlite", database=path), poolclass=NullPool)

    # pysqlite opens transactions late and never around DDL: take over (SQLAlchemy's recipe).
    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def sqlite_versions(path: str) -> list[str]:
    """The revisions a SQLite file records (none: no table, no file, or it cannot be read here, which the
    migration's own path then reports)."""
    if path != ":memory:" and not Path(path).exists():
        return []
    try:
        with closing(sqlite3.connect(path)) as conn:
            return [str(row[0]) for row in conn.execute(_VERSION)]
    except sqlite3.Error:
        return []


def upgrade_sqlite(path: str, target: str = "head") -> None:
    """Bring a SQLite file's schema to ``target`` (blocking: run it off the event loop)."""
    if target == "head" and sqlite_versions(path) == [HEAD]:
        return
    engine = sqlite_engine(path)
    try:
        with engine.begin() as conn:
            upgrade(conn, target)
    finally:
        engine.dispose()


def postgres_engine(url: str, schema: str | None) -> AsyncEngine:
    """A SQLAlchemy engine on ``url`` (its ``schema`` first on the search path), without a pool.

    asyncpg reads the URL itself, as the store's pool does: SQLAlchemy's dialect
    would pass libpq's query parameters (``sslmode=require``...) on as keywords
    asyncpg has not got, and the migration of such a database failed.
    """
    import asyncpg
    from sqlalchemy.ext.asyncio import create_async_engine  # needs greenlet: the postgres extra

    settings = {"search_path": schema} if schema else {}

    async def connect() -> Any:
        return await asyncpg.connect(url, server_settings=settings)

    return create_async_engine("postgresql+asyncpg://", poolclass=NullPool, async_creator=connect)


async def postgres_versions(url: str, schema: str | None, connect_timeout: float = 60.0) -> list[str]:
    """The revisions a PostgreSQL schema records (none: no table); ``connect_timeout``: seconds to connect."""
    import asyncpg

    settings = {"search_path": schema} if schema else {}
    conn = await asyncpg.connect(url, server_settings=settings, timeout=connect_timeout)
    try:
        return [str(row[0]) for row in await conn.fetch(_VERSION)]
    except asyncpg.UndefinedTableError:
        return []
    finally:
        await conn.close()


async def upgrade_postgres(url: str, schema: str | None, target: str = "head") -> None:
    """Bring a PostgreSQL schema to ``target``, one replica at a time (an advisory lock)."""
    if target == "head" and await postgres_versions(url, schema) == [HEAD]:
        return
    engine = postgres_engine(url, schema)

    def locked(conn: sa.Connection) -> None:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        upgrade(conn, target)

    try:
        async with engine.begin() as conn:
            await conn.run_sync(locked)
    finally:
        await engine.dispose()
