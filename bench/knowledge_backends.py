"""The backends ``python -m bench --knowledge`` measures, each in scratch space it removes afterwards.

A :class:`Site` is one backend's scratch space (a SQLite file, a PostgreSQL
schema, a Redis key prefix): a store can be opened on it, closed, and opened
again on the same data (what a server restart does), and it says how much the
backend holds for it (the file's size, the schema's relations, Redis's memory).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferryman.storage.base import Store
from ferryman.storage.sql.sqlite import SqliteStore

BULK_MEMORY = "6GB"
"""``maintenance_work_mem`` of the bulk load's index build: 1,000,000 vectors of 384 dimensions and their graph
(about 2 GB) fit, so pgvector builds in memory (past it, the build goes on on disk, many times slower)."""


@dataclass(frozen=True)
class BulkLoad:
    """A fill with the vector index dropped and built after, what an operator loading millions of chunks does.

    Attributes:
        drop: Drops the index of the bench's dimension (before the fill).
        build: Builds it again (after the fill), as one statement.
        label: How the build is made, for the table.
    """

    drop: Callable[[], Awaitable[None]]
    build: Callable[[], Awaitable[None]]
    label: str


@dataclass
class Site:
    """One backend's scratch space.

    Attributes:
        open: Opens a store on the space's data (the same data each time).
        held_bytes: What the backend holds for it: SQLite's files, the PostgreSQL schema's relations
            (tables and indexes, on disk), or the Redis server's ``used_memory`` (all of it: the bench's
            prefix is the only thing that grows while it runs).
        held_label: What ``held_bytes`` counts, for the table.
        bulk: How to fill it with its vector index dropped (PostgreSQL's HNSW index), None where no index
            is kept in the database.
    """

    open: Callable[[], AbstractAsyncContextManager[Store]]
    held_bytes: Callable[[], Awaitable[int]]
    held_label: str
    bulk: BulkLoad | None = None


SiteFactory = Callable[[], AbstractAsyncContextManager[Site]]


def rss_bytes() -> int:
    """This process's resident memory (the stores run in it: their in-process indexes count here); Linux only."""
    resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


BACKENDS = ("sqlite", "postgres", "redis")


def sites(
    tmp: Path, postgres: str | None, redis: str | None, only: tuple[str, ...] = BACKENDS
) -> dict[str, SiteFactory]:
    """The backends to measure among ``only``: SQLite in ``tmp``; PostgreSQL and Redis at their URLs."""
    found: dict[str, SiteFactory] = {"sqlite": lambda: _sqlite(tmp)}
    if postgres:
        found["postgres"] = lambda: _postgres(postgres)
    if redis:
        found["redis"] = lambda: _redis(redis)
    return {backend: site for backend, site in found.items() if backend in only}


def backend_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of an in-process storage bench: the backends beside SQLite, which to measure, where rows go."""
    parser.add_argument("--postgres", help="also measure PostgreSQL at this postgresql:// URL")
    parser.add_argument("--redis", help="also measure Redis at this redis:// URL")
    parser.add_argument("--only", nargs="+", default=[], help="measure only these backends (sqlite, postgres, redis)")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")


def chosen(only: list[str] | set[str]) -> tuple[str, ...]:
    """The backends ``--only`` names (none named: all of them)."""
    return tuple(only) or BACKENDS


def report(table: str, rows: list[dict[str, Any]], out: Path | None) -> None:
    """Print a bench's table, and write its rows as JSON to ``out`` when given."""
    sys.stdout.write(table + "\n")
    if out:
        out.write_text(json.dumps(rows, indent=2) + "\n")


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

    from ferryman.storage.sql.postgres import PostgresStore

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
        bulk = _bulk_load(admin, schema)
        yield Site(lambda: _opened(PostgresStore(url, schema=schema)), held, "schema's tables and indexes", bulk)
    finally:
        try:
            await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await admin.close()


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _bulk_load(admin: Any, schema: str) -> BulkLoad:
    """Drop and build the bench dimension's HNSW index in ``schema``, on the admin connection."""
    from ferryman.storage.sql.pgvector import EXTENSION_SCHEMA
    from ferryman.storage.sql.vectors import PgvectorIndex, index_name

    from .knowledge_data import DIMENSION

    workers = max(0, (os.cpu_count() or 1) - 1)  # the leader builds too

    async def drop() -> None:
        await admin.execute(f"DROP INDEX IF EXISTS {_quoted(schema)}.{index_name(DIMENSION)}")

    async def build() -> None:
        extension_schema = await admin.fetchval(EXTENSION_SCHEMA)  # made by the store when it opened
        async with admin.transaction():
            await admin.execute(f"SET LOCAL search_path = {_quoted(schema)}")
            await admin.execute(f"SET LOCAL maintenance_work_mem = '{BULK_MEMORY}'")
            await admin.execute(f"SET LOCAL max_parallel_maintenance_workers = {workers}")
            await admin.execute(PgvectorIndex(extension_schema).create_index(DIMENSION))

    label = f"maintenance_work_mem {BULK_MEMORY}, {workers + 1} processes"
    return BulkLoad(drop, build, label)


@asynccontextmanager
async def _redis(url: str) -> AsyncIterator[Site]:
    from redis.asyncio import Redis

    from ferryman.storage.redis.store import RedisStore

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
