"""Choosing the storage backend from ``--db``: a path, or a URL."""

from __future__ import annotations

from .base import Store
from .sqlite import SqliteStore

SQLITE_PREFIX = "sqlite:///"
POSTGRES_PREFIXES = ("postgresql://", "postgres://")


def store_for(db: str) -> Store:
    """The store a ``--db`` value names.

    A plain path or ``sqlite:///PATH`` is SQLite; ``postgresql://…`` is
    PostgreSQL (needs the ``postgres`` extra).
    """
    if db.startswith(POSTGRES_PREFIXES):
        from .postgres import PostgresStore  # asyncpg is an optional extra

        return PostgresStore(db)
    if db.startswith(SQLITE_PREFIX):
        return SqliteStore(db.removeprefix(SQLITE_PREFIX))
    return SqliteStore(db)
