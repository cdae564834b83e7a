"""The SQLite backend, the default (no set-up): its dialect and its driver, under the one SQL store.

Each call hands a whole unit of work to a thread, so a transaction of several
statements costs one hop, and the single writer serialises writes without
"database is locked" between them; readers have their own connections (WAL).
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from ferryman.storage import codec
from ferryman.storage.sql.dialects import SqlDialect
from ferryman.storage.sql.lanes import ThreadLane
from ferryman.storage.sql.migrate import upgrade_sqlite
from ferryman.storage.sql.seam import ForeignKeyViolation, IntegrityViolation, Query, UniqueViolation, Work, run_unit
from ferryman.storage.sql.store import SqlStore

T = TypeVar("T")


class SqliteDialect(SqlDialect):
    """SQLite's values: times as ISO text or epoch seconds; vectors are searched in process."""

    # Python's sqlite3 cannot load an extension as shipped: vectors are searched in process (``vectors`` None).

    def __init__(self) -> None:
        super().__init__("sqlite")

    def stamp(self, moment: datetime | None) -> Any:
        """ISO 8601 text in UTC."""
        return codec.dump_time(moment)

    def read_stamp(self, value: Any) -> datetime | None:
        """Decode ISO 8601 text."""
        return codec.load_time(value)

    def epoch(self, moment: datetime | None) -> Any:
        """Seconds since the epoch."""
        return moment.timestamp() if moment is not None else None

    def read_epoch(self, value: Any) -> datetime:
        """An aware datetime of epoch seconds."""
        return datetime.fromtimestamp(value, UTC)


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def _violation(exc: sqlite3.IntegrityError) -> IntegrityViolation:
    name = getattr(exc, "sqlite_errorname", "")
    if name == "SQLITE_CONSTRAINT_FOREIGNKEY":
        return ForeignKeyViolation(str(exc))
    if name in ("SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"):
        return UniqueViolation(str(exc))
    return IntegrityViolation(str(exc))


def _execute(conn: sqlite3.Connection, query: Query[Any]) -> Any:
    # Cursors are closed here, on the connection's own thread: one finalised on the
    # event loop while its connection works elsewhere makes SQLite answer "API misuse".
    try:
        if query.fetch == "many":
            conn.executemany(query.sql, query.params).close()
            return None
        cursor = conn.execute(query.sql, query.params)
    except sqlite3.IntegrityError as exc:
        raise _violation(exc) from exc
    try:
        if query.fetch == "all":
            return cursor.fetchall()
        if query.fetch == "one":
            return cursor.fetchone()
        return cursor.rowcount
    finally:
        cursor.close()


def _run(conn: sqlite3.Connection, work: Query[T] | Work[T]) -> T:
    if isinstance(work, Query):
        return _execute(conn, work)  # type: ignore[no-any-return]
    return run_unit(work, lambda query: _execute(conn, query))


class SqliteDriver:
    """Owns the connections to one database file: one writer thread, a few reader threads.

    Args:
        path: The database file; its folder is created if missing.
        readers: Number of reader threads.
    """

    def __init__(self, path: str, readers: int = 2) -> None:
        self.path = path
        self.dialect = SqliteDialect()
        self._writer = ThreadLane(1, "sqlite-w")
        self._readers = ThreadLane(readers, "sqlite-r")
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()

    async def open(self) -> None:
        """Create the folder and the file if needed, and bring the schema up to date."""
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        await self._writer.call(upgrade_sqlite, self.path)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self.path)
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def _in_transaction(self, work: Query[T] | Work[T]) -> T:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = _run(conn, work)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    async def write(self, work: Query[T] | Work[T]) -> T:
        """Run ``work`` in one write transaction on the writer thread."""
        return await self._writer.call(self._in_transaction, work)

    async def read(self, work: Query[T] | Work[T]) -> T:
        """Run ``work`` on a reader thread (it sees committed data only)."""
        return await self._readers.call(self._read, work)

    def _read(self, work: Query[T] | Work[T]) -> T:
        return _run(self._conn(), work)

    async def close(self) -> None:
        """Stop the threads and close every connection."""
        self._writer.close()
        self._readers.close()
        with self._all_lock:
            for conn in self._all:
                conn.close()
            self._all.clear()


class SqliteStore(SqlStore):
    """Everything in one SQLite file.

    Args:
        path: Path of the database file (``:memory:`` is not supported: readers
            and the writer need to share a file).
    """

    def __init__(self, path: str) -> None:
        super().__init__(SqliteDriver(path))
