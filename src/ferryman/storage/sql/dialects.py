"""What differs between SQLite and PostgreSQL for the kernel's statements, in one place.

Statements are SQLAlchemy Core, built once per shape and compiled once per dialect to text with ``:name``
parameters, which today's drivers (``SqliteDriver``, ``PostgresDriver``) run as they are. The differences:

- upserts: ``INSERT … ON CONFLICT`` is the same SQL on both, but SQLAlchemy builds it per dialect;
- list parameters: SQLite reads a JSON array with ``json_each``; PostgreSQL takes a ``text[]`` and ``= ANY``;
- row locks: PostgreSQL locks what a write unit reads (``FOR UPDATE``, ``SKIP LOCKED`` for sweeps); SQLite's
  single writer needs none, and SQLAlchemy leaves the clause out there;
- a read snapshot: ``BEGIN`` on SQLite's reader connection; a repeatable-read, read-only transaction on
  PostgreSQL.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.sql.elements import ClauseElement

from .seam import Driver

CACHE_SIZE = 512
"""Compiled statements kept per dialect (one per shape of query: a filter's shape, a page's options)."""


@dataclass(frozen=True, slots=True)
class Compiled:
    """A statement's text with ``:name`` parameters, and the values of those the statement fixed itself."""

    sql: str
    fixed: Mapping[str, Any]

    def params(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Every parameter the text names: the fixed ones, then ``given``."""
        return {**self.fixed, **given} if self.fixed else dict(given)


class SqlDialect:
    """One database's way of writing the kernel's statements, and the cache of their compiled text.

    Args:
        name: ``sqlite`` or ``postgresql``.
    """

    def __init__(self, name: str) -> None:
        if name not in ("sqlite", "postgresql"):
            raise ValueError(f"no SQL dialect {name!r} (sqlite, postgresql)")
        self.name = name
        self._dialect: Dialect = (
            sqlite.pysqlite.dialect(paramstyle="named")
            if name == "sqlite"
            else postgresql.psycopg2.dialect(paramstyle="named")  # type: ignore[no-untyped-call]
        )
        self._cache: OrderedDict[Hashable, Compiled] = OrderedDict()

    @property
    def is_sqlite(self) -> bool:
        """Whether this is SQLite (one writer at a time, no row locks)."""
        return self.name == "sqlite"

    def compiled(self, key: Hashable, build: Callable[[], ClauseElement]) -> Compiled:
        """The statement of shape ``key``, built by ``build`` and compiled the first time it is asked for."""
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
            return found
        compiled = build().compile(dialect=self._dialect)
        fixed = {name: bind.effective_value for name, bind in _binds(compiled).items() if not bind.required}
        found = Compiled(str(compiled), fixed)
        self._cache[key] = found
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return found

    def insert(self, table: sa.Table) -> sqlite.Insert | postgresql.Insert:
        """An ``INSERT`` that can take ``on_conflict_do_nothing`` / ``on_conflict_do_update``."""
        return sqlite.insert(table) if self.is_sqlite else postgresql.insert(table)

    def one_of(self, column: sa.ColumnElement[Any], param: str) -> sa.ColumnElement[bool]:
        """``column`` equals one of the strings of list parameter ``param`` (pass :meth:`array` of them)."""
        if self.is_sqlite:
            values = sa.func.json_each(sa.bindparam(param)).table_valued("value")
            return column.in_(sa.select(values.c.value).scalar_subquery())
        return column == sa.any_(sa.bindparam(param, type_=postgresql.ARRAY(sa.Text())))

    def array(self, values: Sequence[str] | frozenset[str]) -> Any:
        """A list parameter's value: SQLite's JSON text, PostgreSQL's list."""
        ordered = sorted(values) if isinstance(values, frozenset) else list(values)
        return json.dumps(ordered) if self.is_sqlite else ordered

    @property
    def begin_snapshot(self) -> str:
        """Starts a transaction that reads one snapshot and writes nothing."""
        return "BEGIN" if self.is_sqlite else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


def _binds(compiled: sa.Compiled) -> dict[str, sa.BindParameter[Any]]:
    binds: dict[sa.BindParameter[Any], str] = getattr(compiled, "bind_names", {})
    return {name: bind for bind, name in binds.items()}


def dialect_of(driver: Driver) -> SqlDialect:
    """The kernel dialect of one of today's drivers (SQLite's or PostgreSQL's)."""
    from ferryman.storage.sqlite import SqliteDriver

    return SqlDialect("sqlite" if isinstance(driver, SqliteDriver) else "postgresql")
