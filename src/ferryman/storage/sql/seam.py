"""The seam between the one SQL store and a database: queries, units of work, dialects, drivers.

The store writes each statement once, with named parameters (``:name``), and a
transaction as a *unit of work*: a generator that yields :class:`Query` objects
and receives their results. A driver runs a whole unit on its own terms (the
SQLite driver in one hop to its writer thread, the PostgreSQL driver over one
pooled connection), so the store never learns which database it talks to; what
does differ between databases (time columns, list parameters, upserts, row
locking) is asked of the driver's dialect (:mod:`.dialects`), which also builds
and compiles the statements.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from ferryman.storage.sql.dialects import SqlDialect

R = TypeVar("R")
T = TypeVar("T")

Row = Sequence[Any]
Fetch = Literal["all", "one", "count", "many"]

NO_LIMIT = 2**62
"""A ``LIMIT`` that never binds (SQLite refuses NULL, PostgreSQL refuses -1)."""


@dataclass(frozen=True, slots=True)
class Query(Generic[T]):
    """One statement, its parameters by name, and what to bring back (see the builders below)."""

    sql: str
    params: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    fetch: Fetch


def rows(sql: str, **params: Any) -> Query[list[Row]]:
    """Every row the statement returns."""
    return Query(sql, params, "all")


def first(sql: str, **params: Any) -> Query[Row | None]:
    """The first row the statement returns, or None."""
    return Query(sql, params, "one")


def count(sql: str, **params: Any) -> Query[int]:
    """How many rows the statement changed."""
    return Query(sql, params, "count")


def each(sql: str, params: Sequence[Mapping[str, Any]]) -> Query[None]:
    """The statement once per parameter set (nothing when there is none)."""
    return Query(sql, params, "many")


Work = Generator[Query[Any], Any, R]
"""A unit of work: yields queries, is sent each one's result, returns its own."""


class IntegrityViolation(Exception):
    """A statement broke a constraint; drivers raise a subclass, thrown into the unit that ran it."""


class UniqueViolation(IntegrityViolation):
    """A unique (or primary) key is taken."""


class ForeignKeyViolation(IntegrityViolation):
    """A referenced row is missing."""


class VectorIndex(Protocol):
    """A database's own vector search over chunks (see ``sql/vectors.py``)."""

    def nearest(self, file_ids: list[str] | None, dimension: int, params: dict[str, Any]) -> Work[list[Row]]:
        """Rows of chunk columns and cosine similarity nearest ``:embedding``, best first (of these files only,
        unless None); ``params``: ``vector_store_id``, ``embedding``, ``limit``."""
        ...

    def prepare(self, dimension: int) -> Work[None]:
        """Make what search needs for a dimension (run in the transaction creating a store of it)."""
        ...


class Driver(Protocol):
    """Connections to one database, running queries and units of work."""

    @property
    def dialect(self) -> SqlDialect:
        """The database's differences: how its statements and values are written."""
        ...

    async def open(self) -> None:
        """Connect and bring the schema up to date."""
        ...

    async def close(self) -> None:
        """Release every connection."""
        ...

    async def read(self, work: Query[T] | Work[T]) -> T:
        """Run a query or a unit that only reads (it sees committed data)."""
        ...

    async def write(self, work: Query[T] | Work[T]) -> T:
        """Run a query or a unit in one transaction."""
        ...


def run_unit(work: Work[R], execute: Callable[[Query[Any]], Any]) -> R:
    """Drive a unit of work with a blocking ``execute``; constraint violations are thrown into the unit."""
    result: Any = None
    error: IntegrityViolation | None = None
    while True:
        try:
            query = work.throw(error) if error is not None else work.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            result, error = execute(query), None
        except IntegrityViolation as exc:
            result, error = None, exc


async def run_unit_async(work: Work[R], execute: Callable[[Query[Any]], Awaitable[Any]]) -> R:
    """Drive a unit of work with an awaitable ``execute``; constraint violations are thrown into the unit."""
    result: Any = None
    error: IntegrityViolation | None = None
    while True:
        try:
            query = work.throw(error) if error is not None else work.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            result, error = await execute(query), None
        except IntegrityViolation as exc:
            result, error = None, exc
