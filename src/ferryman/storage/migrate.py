"""Versioned schema migrations: numbered SQL files applied once, in order, and recorded."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from importlib import resources


def migration_scripts(dialect: str) -> list[tuple[int, str, str]]:
    """Return ``(version, name, sql)`` of every migration of a dialect, in order."""
    folder = resources.files("ferryman.storage.migrations").joinpath(dialect)
    scripts = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            scripts.append((version, entry.name, entry.read_text(encoding="utf-8")))
    return sorted(scripts)


def migrate_sqlite(conn: sqlite3.Connection, up_to: int | None = None) -> list[str]:
    """Apply pending migrations (up to version ``up_to``, default all); return the names applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    names = []
    for version, name, sql in migration_scripts("sqlite"):
        if version in applied or (up_to is not None and version > up_to):
            continue
        # Rebuilding a table (SQLite's way to change a column) must not cascade
        # deletes while the old table is dropped; the pragma only works outside
        # a transaction, and the result is checked before it is turned back on.
        rebuild = FOREIGN_KEYS_OFF in sql.splitlines()[0]
        if rebuild:
            conn.execute("PRAGMA foreign_keys=OFF")
        try:
            _apply(conn, version, name, sql)
            if rebuild and conn.execute("PRAGMA foreign_key_check").fetchone() is not None:
                raise RuntimeError(f"migration {name} left dangling foreign keys")
        finally:
            if rebuild:
                conn.execute("PRAGMA foreign_keys=ON")
        names.append(name)
    return names


FOREIGN_KEYS_OFF = "-- migrate: foreign_keys=off"


def _apply(conn: sqlite3.Connection, version: int, name: str, sql: str) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _statements(sql):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (version, name, datetime.now(UTC).isoformat()),
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _statements(sql: str) -> list[str]:
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]
