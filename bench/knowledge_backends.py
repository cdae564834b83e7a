"""The backends ``python -m bench --knowledge`` measures, each in scratch space it removes afterwards.

A :class:`Site` is one backend's scratch space (a SQLite file, a PostgreSQL
schema, a Redis key prefix): a store can be opened on it, closed, and opened
again on the same data (what a server restart does), and it says how much the
backend holds for it (the file's size, the schema's relations, Redis's memory).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from ferryman.storage.base import Store
from ferryman.storage.sqlite import SqliteStore


@dataclass
class Site:
    """One backend's scratch space.

    Attributes:
        open: Opens a store on the space's data (the same data each time).
        held_bytes: What the backend holds for it: SQLite's files, the PostgreSQL schema's relations
            (tables and indexes, on disk), or the Redis server's ``used_memory`` (all of it: the bench's
            prefix is the only thing that grows while it runs).
        held_label: What ``held_bytes`` counts, for the table.
    """

    open: Callable[[], AbstractAsyncContextManager[Store]]
    held_bytes: Callable[[], Awaitable[int]]
    held_label: str


SiteFactory = Callable[[], AbstractAsyncContextManager[Site]]


def rss_bytes() -> int:
    """This process's resident memory (the stores run in it: their in-process indexes count here); Linux only."""
    resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def sites(tmp: Path, postgres: str | None, redis: str | None) -> dict[str, SiteFactory]:
    """The backends to measure: SQLite in ``tmp``; PostgreSQL and Redis at their URLs."""
    found: dict[str, SiteFactory] = {"sqlite": lambda: _sqlite(tmp)}
    if postgres:
        found["postgres"] = lambda: _postgres(postgres)
    if redis:
        found["redis"] = lambda: _redis(redis)
    return found


@asynccontextmanager
async def _opened(store: Store) -> AsyncIterator[Store]:
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def _sqlite(tmp: Path) -> AsyncIterator[Site]:
    path = tmp / f"knowledge-{uuid.uuid4().hex[:8]}.db"
    files = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]

    async def held() -> int:
        return sum(f.stat().st_size for f in files if f.exists())

    try:
        yield Site(lambda: _opened(SqliteStore(str(path))), held, "database files")
    finally:
        for file in files:
            if file.exists():
                os.unlink(file)


@asynccontextmanager
async def _postgres(url: str) -> AsyncIterator[Site]:
    import asyncpg

    from ferryman.storage.postgres import PostgresStore

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(url)

    async def held() -> int:
        size = await admin.fetchval(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')",
            schema,
        )
        return int(size)

    try:
        yield Site(lambda: _opened(PostgresStore(url, schema=schema)), held, "schema's tables and indexes")
    finally:
        try:
            await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await admin.close()


@asynccontextmanager
async def _redis(url: str) -> AsyncIterator[Site]:
    from redis.asyncio import Redis

    from ferryman.storage.redis_store import RedisStore

    prefix = f"bench_{uuid.uuid4().hex[:10]}:"
    admin = Redis.from_url(url)

    async def held() -> int:
        info = await admin.info("memory")
        return int(info["used_memory"])

    try:
        yield Site(lambda: _opened(RedisStore(url, prefix=prefix)), held, "Redis used_memory")
    finally:
        try:
            keys = [key async for key in admin.scan_iter(match=f"{prefix}*", count=1000)]
            for start in range(0, len(keys), 1000):
                await admin.delete(*keys[start : start + 1000])
        finally:
            await admin.aclose()
