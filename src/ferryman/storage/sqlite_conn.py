"""Runs SQLite work off the event loop: one writer thread, a few reader threads.

Each call hands a whole function to a thread, so a transaction of several
statements costs one hop, and the single writer serialises writes without
"database is locked" between them.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

R = TypeVar("R")


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def _in_thread(result: R) -> R:
    """Close a cursor a unit of work returned, on the connection's own thread.

    A cursor that reached the event loop would be finalised there, while its
    connection works on another thread: SQLite answers "API misuse".
    """
    if isinstance(result, sqlite3.Cursor):
        result.close()
        return None  # type: ignore[return-value]
    return result


class SqliteRunner:
    """Owns the connections to one database file.

    Args:
        path: The database file; its folder is created if missing.
        readers: Number of reader threads.
    """

    def __init__(self, path: str, readers: int = 2) -> None:
        self.path = path
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-w")
        self._readers = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="sqlite-r")
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()

    def prepare(self) -> None:
        """Create the database folder; call before the first query."""
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self.path)
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def _in_transaction(self, work: Callable[[sqlite3.Connection], R]) -> R:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = _in_thread(work(conn))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    async def write(self, work: Callable[[sqlite3.Connection], R]) -> R:
        """Run ``work`` in one write transaction on the writer thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer, self._in_transaction, work)

    async def read(self, work: Callable[[sqlite3.Connection], R]) -> R:
        """Run ``work`` on a reader thread (it sees committed data only)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, lambda: _in_thread(work(self._conn())))

    async def raw(self, work: Callable[[sqlite3.Connection], R]) -> R:
        """Run ``work`` on the writer thread outside any transaction (migrations)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer, lambda: _in_thread(work(self._conn())))

    def close(self) -> None:
        """Stop the threads and close every connection."""
        self._writer.shutdown(wait=True)
        self._readers.shutdown(wait=True)
        with self._all_lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
