"""Databases as the home-made migration runner (before Alembic) left them, built from its own SQL files.

The files are copied verbatim under ``tests/fixtures/legacy_schema``; the runner's
logic is kept here only to build such databases.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

FILES = Path(__file__).resolve().parent.parent / "fixtures" / "legacy_schema"
_FOREIGN_KEYS_OFF = "-- migrate: foreign_keys=off"


def scripts(dialect: str, up_to: int) -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` of the legacy migrations of a dialect up to version ``up_to``."""
    found = [
        (int(path.name.split("_", 1)[0]), path.name, path.read_text()) for path in FILES.joinpath(dialect).glob("*.sql")
    ]
    return sorted(entry for entry in found if entry[0] <= up_to)


def build_sqlite(path: Path, up_to: int) -> sqlite3.Connection:
    """A SQLite file migrated by the legacy runner to ``up_to``; returns an open connection (autocommit)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    for version, name, sql in scripts("sqlite", up_to):
        conn.execute("PRAGMA foreign_keys=" + ("OFF" if _FOREIGN_KEYS_OFF in sql else "ON"))
        lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
        conn.execute("BEGIN")
        for statement in "\n".join(lines).split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, datetime.now(UTC).isoformat()))
        conn.execute("COMMIT")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


async def build_postgres(conn: asyncpg.Connection, up_to: int) -> None:
    """Migrate the connection's search path with the legacy PostgreSQL runner to ``up_to``."""
    await conn.execute(
        "CREATE TABLE schema_migrations ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
    )
    for version, name, sql in scripts("postgres", up_to):
        async with conn.transaction():
            await conn.execute(sql)
            await conn.execute("INSERT INTO schema_migrations VALUES ($1, $2, $3)", version, name, datetime.now(UTC))
