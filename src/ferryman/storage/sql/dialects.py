"""What differs between SQLite and PostgreSQL, in one place: how statements are written, and how values are.

Statements are SQLAlchemy Core, built once per shape and compiled once per dialect to text with ``:name``
parameters, which the drivers (``SqliteDriver``, ``PostgresDriver``) run as they are; no statement is formatted
from strings. The differences in how they are written:

- upserts: ``INSERT … ON CONFLICT`` is the same SQL on both, but SQLAlchemy builds it per dialect;
- list parameters: SQLite reads a JSON array with ``json_each``; PostgreSQL takes a ``text[]`` and ``= ANY``;
- row locks: PostgreSQL locks what a write unit reads (``FOR UPDATE``, ``SKIP LOCKED`` for sweeps); SQLite's
  single writer needs none, and SQLAlchemy leaves the clause out there;
- a read snapshot: ``BEGIN`` on SQLite's reader connection; a repeatable-read, read-only transaction on
  PostgreSQL.

How values differ (times as ISO text or epoch seconds on SQLite, native on PostgreSQL) each backend's subclass
says: ``SqliteDialect`` and ``PostgresDialect``, the drivers' ``dialect``.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.sql.elements import ClauseElement

from ferryman.storage.sql.seam import Query, Row

if TYPE_CHECKING:
    from ferryman.storage.sql.seam import VectorIndex

CACHE_SIZE = 512
"""Compiled statements kept per dialect (one per shape of query: a filter's shape, a page's options)."""


def p(name: str) -> sa.BindParameter[Any]:
    """The parameter ``:name`` of a built statement, bound when the statement runs."""
    return sa.bindparam(name)


@dataclass(frozen=True, slots=True)
class Compiled:
    """A statement's text with ``:name`` parameters, and the values of those the statement fixed itself."""

    sql: str
    fixed: Mapping[str, Any]

    def params(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Every parameter the text names: the fixed ones, then ``given``."""
        return {**self.fixed, **given} if self.fixed else dict(given)

    def rows(self, **params: Any) -> Query[list[Row]]:
        """Every row the statement returns, run with these parameters."""
        return Query(self.sql, self.params(params), "all")

    def first(self, **params: Any) -> Query[Row | None]:
        """The first row the statement returns, or None."""
        return Query(self.sql, self.params(params), "one")

    def count(self, **params: Any) -> Query[int]:
        """How many rows the statement changed."""
        return Query(self.sql, self.params(params), "count")

    def each(self, batch: Sequence[Mapping[str, Any]]) -> Query[None]:
        """The statement once per parameter set (nothing when there is none)."""
        return Query(self.sql, [self.params(params) for params in batch], "many")


class SqlDialect:
    """One database's way of writing statements and values, and the cache of the statements' compiled text.

    Args:
        name: ``sqlite`` or ``postgresql``.
    """

    vectors: VectorIndex | None = None
    """The database's vector search over chunks; None: search in process (``storage/search/vector_index.py``)."""

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
        self._lock = threading.Lock()

    @property
    def is_sqlite(self) -> bool:
        """Whether this is SQLite (one writer at a time, no row locks)."""
        return self.name == "sqlite"

    def compiled(self, key: Hashable, build: Callable[[], ClauseElement]) -> Compiled:
        """The statement of shape ``key``, built by ``build`` and compiled the first time it is asked for."""
        # SQLite's units of work build statements on the driver's threads, beside the event loop's.
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        compiled = build().compile(dialect=self._dialect)
        fixed = {name: bind.effective_value for name, bind in _binds(compiled).items() if not bind.required}
        found = Compiled(str(compiled), fixed)
        with self._lock:
            self._cache[key] = found
            if len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return found

    def insert(self, table: sa.TableClause) -> sqlite.Insert | postgresql.Insert:
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

    def stamp(self, moment: datetime | None) -> Any:
        """A value for a time column (SQLite: ISO 8601 text)."""
        raise NotImplementedError

    def read_stamp(self, value: Any) -> datetime | None:
        """A time column's value as an aware datetime."""
        raise NotImplementedError

    def epoch(self, moment: datetime | None) -> Any:
        """A value for an instant compared in SQL: leases and expiries (SQLite: epoch seconds)."""
        raise NotImplementedError

    def read_epoch(self, value: Any) -> datetime:
        """An instant column's value as an aware datetime."""
        raise NotImplementedError


def _binds(compiled: sa.Compiled) -> dict[str, sa.BindParameter[Any]]:
    binds: dict[sa.BindParameter[Any], str] = getattr(compiled, "bind_names", {})
    return {name: bind for bind, name in binds.items()}
