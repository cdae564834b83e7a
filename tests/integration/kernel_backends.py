"""Opening every storage kernel for the kernel contract suite, each on a fresh, private database.

Add a backend with one line in ``BACKENDS`` (and its opener below): an opener takes the test's temporary
directory and the schema, and yields an opened kernel whose database nobody else uses. Where a backend can
run a second kernel over the same database (another process, in production), add a line in ``TWINS`` too:
the concurrency tests then run on two instances; without one they share the first.

Reaching the servers goes through ``storage_backends`` (``require_server``, ``unavailable``, the URLs).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, cast

from storage_backends import CONNECT_TIMEOUT, POSTGRES_URL, REDIS_URL, postgres_store, require_server, unavailable

from ferryman.storage.kernel.memory import MemoryKernel
from ferryman.storage.kernel.model import Schema
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.sql.kernel import SqlKernel
from ferryman.storage.sql.seam import Driver
from ferryman.storage.sql.sqlite import SqliteDriver
from inprocess import migrated_sqlite


@asynccontextmanager
async def memory_kernel(tmp_path: Path, schema: Schema) -> AsyncIterator[Kernel]:
    """The in-memory reference kernel (``tmp_path`` unused: it keeps nothing on disk)."""
    kernel = MemoryKernel(schema)
    await kernel.open()
    try:
        yield kernel
    finally:
        await kernel.close()


@asynccontextmanager
async def _sql_kernel(make: Callable[[], Driver], schema: Schema) -> AsyncIterator[Kernel]:
    kernel = SqlKernel(make, schema)
    await kernel.open()
    try:
        yield kernel
    finally:
        await kernel.close()


def _sqlite_driver(path: str) -> Callable[[], Driver]:
    return lambda: SqliteDriver(path)


def _postgres_driver(schema: str) -> Callable[[], Driver]:
    from ferryman.storage.sql.postgres import PostgresDriver

    return lambda: PostgresDriver(POSTGRES_URL, schema=schema)


@asynccontextmanager
async def sqlite_kernel(tmp_path: Path, schema: Schema) -> AsyncIterator[Kernel]:
    """The SQL kernel on a new SQLite file at head (the migrated template copied)."""
    async with _sql_kernel(_sqlite_driver(migrated_sqlite(tmp_path / "kernel.db")), schema) as kernel:
        yield kernel


@asynccontextmanager
async def postgres_kernel(tmp_path: Path, schema: Schema) -> AsyncIterator[Kernel]:
    """The SQL kernel on this process's PostgreSQL schema, emptied and at head (skips when unreachable)."""
    async with postgres_store(tmp_path) as migrated:
        name: str = migrated._db._schema  # type: ignore[attr-defined]
    async with _sql_kernel(_postgres_driver(name), schema) as kernel:
        yield kernel


@asynccontextmanager
async def sql_twin(kernel: Kernel, schema: Schema) -> AsyncIterator[Kernel]:
    """A second SQL kernel, with its own driver, over the database of ``kernel``."""
    driver = cast(SqlKernel, kernel).driver
    if isinstance(driver, SqliteDriver):
        make = _sqlite_driver(driver.path)
    else:
        make = _postgres_driver(driver._schema)  # type: ignore[attr-defined]
    async with _sql_kernel(make, schema) as twin:
        yield twin


@asynccontextmanager
async def _redis_kernel(prefix: str, schema: Schema) -> AsyncIterator[Kernel]:
    """A Redis kernel under ``prefix`` on its own client (skips, or fails under CI, when Redis is unreachable)."""
    try:
        from ferryman.redis_url import connect
        from ferryman.storage.redis.kernel import RedisKernel
    except ImportError as exc:
        unavailable(f"the Redis kernel cannot be imported: {exc}")
    client = connect(REDIS_URL, max_connections=8, wait_seconds=CONNECT_TIMEOUT)

    async def probe() -> None:
        await client.ping()

    try:
        await require_server("Redis", REDIS_URL, "FERRYMAN_TEST_REDIS_URL", probe)
        kernel = RedisKernel(client, schema, prefix=prefix)
        await kernel.open()
        try:
            yield kernel
        finally:
            await kernel.close()
    finally:
        await client.aclose()


@asynccontextmanager
async def redis_kernel(tmp_path: Path, schema: Schema) -> AsyncIterator[Kernel]:
    """The Redis kernel under a new key prefix, whose keys are deleted afterwards."""
    from ferryman.storage.redis.keys import pattern

    prefix = f"kernel_{uuid.uuid4().hex[:12]}:"
    async with _redis_kernel(prefix, schema) as kernel:
        try:
            yield kernel
        finally:
            client = cast(Any, kernel).client
            stale = [key async for key in client.scan_iter(match=pattern(prefix), count=1000)]
            if stale:
                await client.delete(*stale)


@asynccontextmanager
async def redis_twin(kernel: Kernel, schema: Schema) -> AsyncIterator[Kernel]:
    """A second Redis kernel, with its own client, under the prefix of ``kernel``."""
    async with _redis_kernel(cast(Any, kernel).prefix, schema) as twin:
        yield twin


Opener = Callable[[Path, Schema], AbstractAsyncContextManager[Kernel]]
"""Yields an opened kernel over a fresh database made under the given directory (or key prefix, or schema)."""

Twin = Callable[[Kernel, Schema], AbstractAsyncContextManager[Kernel]]
"""Yields a second, opened kernel over the same database as the one given (as another process would)."""

BACKENDS: dict[str, Opener] = {
    "memory": memory_kernel,
    "sqlite": sqlite_kernel,
    "postgres": postgres_kernel,
    "redis": redis_kernel,
}

TWINS: dict[str, Twin] = {
    "sqlite": sql_twin,
    "postgres": sql_twin,
    "redis": redis_twin,
}
