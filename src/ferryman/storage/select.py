"""Choosing the storage backend from ``--db``: a path, or a URL."""

from __future__ import annotations

from ferryman.extras import require
from ferryman.redis_url import split_prefix
from ferryman.storage.base import Store
from ferryman.storage.sql.sqlite import SqliteStore

SQLITE_PREFIX = "sqlite:///"
POSTGRES_PREFIXES = ("postgresql://", "postgres://")
REDIS_PREFIXES = ("redis://", "rediss://")


def store_for(db: str) -> Store:
    """The store a ``--db`` value names.

    A plain path or ``sqlite:///PATH`` is SQLite; ``postgresql://…`` is
    PostgreSQL (needs the ``postgres`` extra); ``redis://…`` or ``rediss://…``
    is Redis (needs the ``redis`` extra; ``?prefix=`` sets the key prefix).

    Raises:
        MissingExtraError: the backend's extra is not installed.
    """
    if db.startswith(POSTGRES_PREFIXES):
        require("postgres", "asyncpg", "a postgresql:// --db")
        require("postgres", "greenlet", "a postgresql:// --db")  # SQLAlchemy's asyncio, for its migrations
        from ferryman.storage.sql.postgres import PostgresStore  # asyncpg is an optional extra

        return PostgresStore(db)
    if db.startswith(REDIS_PREFIXES):
        require("redis", "redis", "a redis:// --db")
        from ferryman.storage.redis.store import RedisStore  # redis is an optional extra

        url, prefix = split_prefix(db)
        return RedisStore(url, prefix)
    if db.startswith(SQLITE_PREFIX):
        return SqliteStore(db.removeprefix(SQLITE_PREFIX))
    return SqliteStore(db)
