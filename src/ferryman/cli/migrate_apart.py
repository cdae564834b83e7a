"""A server's database brought to head in a child process, so that the server itself never holds Alembic.

Alembic, its revisions and the parts of SQLAlchemy they load stay in a process's
memory once imported (about 12 MiB, for good). ``ferryman serve`` calls
:func:`migrate_apart` before it starts: a database that is not at :data:`~.migrate.HEAD` is
opened once by ``python -P -m ferryman.cli.migrate_apart`` (the store's own
``open``, migration included; the ``--db``, which may hold a password, is given on
its standard input, never its command line), and the server's store then finds it
at head and reads one version. With several workers, the database is migrated once,
before any of them starts.

The child is only a saving. A refusal (a ferryman error: a database too old to
adopt, a PostgreSQL without pgvector) is the parent's, with the same message; a
database whose version cannot be read, or a child that fails in any other way,
is left to the server's own open, which reports it as it always did.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading

from ferryman.errors import ConfigurationError, FerrymanError
from ferryman.logs import escape, redacted_url
from ferryman.storage.select import POSTGRES_PREFIXES, REDIS_PREFIXES, SQLITE_PREFIX, store_for
from ferryman.storage.sql.migrate import HEAD, postgres_versions, sqlite_versions

log = logging.getLogger(__name__)

REFUSED = 2
"""The child's status when the store refused the database (its message, one line, last on stderr)."""
TIMEOUT_S = 600.0
"""How long the child may migrate before the server migrates in process instead."""
PROBE_TIMEOUT_S = 10.0
"""How long the look at a PostgreSQL schema's version may take (asyncpg's own default is 60 s)."""


def behind(db: str) -> bool:
    """Whether a ``--db`` is a SQL database known to need migrating (not at :data:`~.migrate.HEAD`).

    Redis (its layout is not Alembic's) and an in-memory SQLite are never; a PostgreSQL whose version cannot be
    read now (unreachable, refused) is not known to be: the server's open says why, once.
    """
    if db.startswith(REDIS_PREFIXES):
        return False
    if db.startswith(POSTGRES_PREFIXES):
        versions = _postgres_versions_within(db, PROBE_TIMEOUT_S)
        return versions is not None and versions != [HEAD]
    path = db.removeprefix(SQLITE_PREFIX)
    return path != ":memory:" and sqlite_versions(path) != [HEAD]


def _postgres_versions_within(url: str, seconds: float) -> list[str] | None:
    """The revisions a PostgreSQL database records, or None when they cannot be read within ``seconds``.

    The look runs on a thread of its own, so that nothing of it (a resolver that does not answer, a pooler that
    holds the query, the connection's close) can hold the start past ``seconds``.
    """
    found: list[list[str]] = []

    def look() -> None:
        try:
            found.append(asyncio.run(postgres_versions(url, None, connect_timeout=seconds)))
        except Exception as exc:  # unreachable, refused, asyncpg's own errors: the server's open reports them
            log.debug("could not read the schema version of %s: %r", redacted_url(url), exc)

    thread = threading.Thread(target=look, name="schema-version", daemon=True)
    thread.start()
    thread.join(seconds)
    return found[0] if found else None


def migrate_apart(db: str) -> None:
    """Bring a ``--db``'s schema to head in a child process, where it is known to be behind.

    Raises:
        ConfigurationError: the store refused the database (as its open in the server would have).
    """
    if not behind(db):
        return
    command = [sys.executable, "-P", "-m", __name__]  # -P: no module of the working directory shadows ours
    try:
        # Bytes, as a path is: a name the locale cannot encode, or another PYTHONIOENCODING, arrives as it is.
        done = subprocess.run(command, input=os.fsencode(db), capture_output=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        log.warning("the schema migration of %s outlasted %.0f s in its own process", redacted_url(db), TIMEOUT_S)
        return
    except OSError as exc:  # no process could be started: the server migrates
        log.debug("the schema migration's process did not start: %r", exc)
        return
    if done.returncode == REFUSED:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        raise ConfigurationError(lines[-1] if lines else "the database was refused")
    if done.returncode != 0:
        log.debug("the schema migration's process failed (%s); the server migrates", done.returncode)


async def _open_once(db: str) -> None:
    store = store_for(db)
    await store.open()
    await store.close()


def main(db: str) -> int:
    """Open the store of ``db`` once (migrating it) and close it; :data:`REFUSED` with the message on stderr when
    the store refuses it."""
    try:
        asyncio.run(_open_once(db))
    except FerrymanError as exc:
        print(escape(exc.message), file=sys.stderr)  # one line: the parent reads the last
        return REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(main(os.fsdecode(sys.stdin.buffer.read())))
