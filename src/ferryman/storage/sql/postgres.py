"""The PostgreSQL backend (one schema shared by any number of replicas): its dialect and its asyncpg driver."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar, cast

import asyncpg

from ferryman.errors import InvalidRequestError
from ferryman.storage.sql.dialects import SqlDialect
from ferryman.storage.sql.migrate import upgrade_postgres
from ferryman.storage.sql.pgvector import EXTENSION_SCHEMA, prepare_connection, require_pgvector
from ferryman.storage.sql.seam import ForeignKeyViolation, Query, UniqueViolation, Work, run_unit_async
from ferryman.storage.sql.store import SqlStore
from ferryman.storage.sql.vectors import PgvectorIndex

T = TypeVar("T")

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# A named parameter; not the second colon of a ``::type`` cast.
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


class PostgresDialect(SqlDialect):
    """PostgreSQL's values: native times and arrays; vectors are searched by pgvector."""

    def __init__(self) -> None:
        super().__init__("postgresql")
        # Where the migration creates the extension; ``open()`` reads where it really is.
        self.vectors: PgvectorIndex = PgvectorIndex("public")

    def stamp(self, moment: datetime | None) -> Any:
        """asyncpg takes aware datetimes as they are."""
        return moment

    def read_stamp(self, value: Any) -> datetime | None:
        """asyncpg returns aware datetimes."""
        return value  # type: ignore[no-any-return]

    def epoch(self, moment: datetime | None) -> Any:
        """A ``timestamptz``, as :meth:`stamp`."""
        return moment

    def read_epoch(self, value: Any) -> datetime:
        """As :meth:`read_stamp`."""
        return value  # type: ignore[no-any-return]


@lru_cache(maxsize=1024)
def _positional(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` with ``$n`` for its named parameters, and their names in order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return _PARAM.sub(number, sql), tuple(names)


async def _execute(conn: asyncpg.Connection, query: Query[Any]) -> Any:
    sql, names = _positional(query.sql)
    try:
        if query.fetch == "many":
            batch = cast(Sequence[Mapping[str, Any]], query.params)
            if batch:
                await conn.executemany(sql, [[params[name] for name in names] for params in batch])
            return None
        params = cast(Mapping[str, Any], query.params)
        args = [params[name] for name in names]
        if query.fetch == "all":
            return await conn.fetch(sql, *args)
        if query.fetch == "one":
            return await conn.fetchrow(sql, *args)
        status: str = await conn.execute(sql, *args)  # "UPDATE 3", "INSERT 0 1", ...
        return int(status.rsplit(" ", 1)[-1])
    except asyncpg.UniqueViolationError as exc:
        raise UniqueViolation(str(exc)) from exc
    except asyncpg.ForeignKeyViolationError as exc:
        raise ForeignKeyViolation(str(exc)) from exc


async def _run(conn: asyncpg.Connection, work: Query[T] | Work[T]) -> T:
    if isinstance(work, Query):
        return await _execute(conn, work)  # type: ignore[no-any-return]
    return await run_unit_async(work, lambda query: _execute(conn, query))


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Nothing to reset in a connection going back to the pool (asyncpg rolls back an open transaction first).

    Its default runs ``pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL`` at every release: one more
    round trip per unit of work, a fifth of a turn's writes to sockets. The store's connections change no session
    state: no ``SET``, ``LISTEN``, cursor or advisory lock (the migration's lock is on a connection of its own). The
    pool's ``init`` sets the HNSW scans' settings once (``pgvector.SEARCH_SETTINGS``): ``RESET ALL`` would undo them.
    """


class PostgresDriver:
    """An asyncpg pool on one database (and schema).

    Args:
        url: A ``postgresql://`` URL.
        schema: The schema to use (created if missing); default: the server's search path.
        pool_size: Most connections the pool opens.
    """

    def __init__(self, url: str, schema: str | None = None, pool_size: int = 10) -> None:
        if schema is not None and not _SCHEMA_NAME.match(schema):
            raise InvalidRequestError(f"invalid schema name {schema!r}")
        self.dialect = PostgresDialect()
        self._url = url
        self._schema = schema
        self._pool_size = pool_size
        self._pool_or_none: asyncpg.Pool | None = None

    @property
    def _pool(self) -> asyncpg.Pool:
        if self._pool_or_none is None:
            raise RuntimeError("the store is not open")
        return self._pool_or_none

    async def open(self) -> None:
        """Check for pgvector, create the schema if asked, bring it up to date, and open the pool.

        Raises:
            ConfigurationError: The server has no pgvector extension, or the database lacks it and the role
                may not create it.
        """
        connection = await asyncpg.connect(self._url)
        try:
            await require_pgvector(connection, self._url)
            if self._schema:
                await connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{self._schema}"')
            await upgrade_postgres(self._url, self._schema)
            self.dialect.vectors = PgvectorIndex(await connection.fetchval(EXTENSION_SCHEMA))
        finally:
            await connection.close()
        settings = {"search_path": self._schema} if self._schema else {}
        self._pool_or_none = await asyncpg.create_pool(
            self._url,
            min_size=1,
            max_size=self._pool_size,
            server_settings=settings,
            init=lambda conn: prepare_connection(conn, self.dialect.vectors.schema),
            reset=_keep_session,
        )

    async def read(self, work: Query[T] | Work[T]) -> T:
        """Run ``work`` on one pooled connection, outside a transaction."""
        async with self._pool.acquire() as conn:
            return await _run(conn, work)

    async def write(self, work: Query[T] | Work[T]) -> T:
        """Run a unit in one transaction (a lone statement is atomic as it is)."""
        async with self._pool.acquire() as conn:
            if isinstance(work, Query):
                return await _run(conn, work)
            async with conn.transaction():
                return await _run(conn, work)

    async def close(self) -> None:
        """Close the pool."""
        if self._pool_or_none is not None:
            await self._pool_or_none.close()
            self._pool_or_none = None


class PostgresStore(SqlStore):
    """Everything in a PostgreSQL database, shared by replicas.

    Args:
        url: A ``postgresql://`` URL.
        schema: The schema to use (created if missing); default: the server's search path.
        pool_size: Most connections the pool opens.
    """

    def __init__(self, url: str, schema: str | None = None, pool_size: int = 10) -> None:
        super().__init__(PostgresDriver(url, schema, pool_size))
