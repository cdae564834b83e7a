"""A server's database brought to head in a child process, so that the server itself never holds Alembic.

Alembic, its revisions and the parts of SQLAlchemy they load stay in a process's
memory once imported (about 12 MiB, for good). ``ferryman serve`` calls
:func:`migrate_apart` before it starts: a database that is not at :data:`~.migrate.HEAD` is
opened once by ``python -m ferryman.cli.migrate_apart DB`` (the store's own
``open``, migration included), and the server's store then finds it at head and
reads one version. With several workers, the database is migrated once, before
any of them starts.

The child is only a saving. A refusal (:class:`~ferryman.errors.ConfigurationError`,
e.g. a database too old to adopt) is the parent's, with the same message; any other
failure leaves the database to the server's own open, which reports it as it always did.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys

from ferryman.errors import ConfigurationError, FerrymanError
from ferryman.logs import redacted_url
from ferryman.storage.select import POSTGRES_PREFIXES, REDIS_PREFIXES, SQLITE_PREFIX, store_for
from ferryman.storage.sql.migrate import HEAD, postgres_versions, sqlite_versions

log = logging.getLogger(__name__)

REFUSED = 2
"""The child's status when the store refused the database (its message on stderr)."""
TIMEOUT_S = 600.0
"""How long the child may migrate before the server migrates in process instead."""


def at_head(db: str) -> bool:
    """Whether a ``--db``'s schema is at :data:`~.migrate.HEAD` (Redis: always, its layout is not Alembic's).

    A database that cannot be read here counts as not at head: the child, or the server after it, says why.
    """
    if db.startswith(REDIS_PREFIXES):
        return True
    if db.startswith(POSTGRES_PREFIXES):
        try:
            return asyncio.run(postgres_versions(db, None)) == [HEAD]
        except Exception as exc:  # unreachable, refused, asyncpg's own errors: the open after reports them
            log.debug("could not read the schema version of %s: %r", redacted_url(db), exc)
            return False
    return sqlite_versions(db.removeprefix(SQLITE_PREFIX)) == [HEAD]


def migrate_apart(db: str) -> None:
    """Bring a ``--db``'s schema to head in a child process, unless it is there already.

    Raises:
        ConfigurationError: the store refused the database (as its open in the server would have).
    """
    if at_head(db):
        return
    command = [sys.executable, "-m", __name__, db]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        log.warning("the schema migration of %s outlasted %.0f s in its own process", redacted_url(db), TIMEOUT_S)
        return
    if done.returncode == REFUSED:
        raise ConfigurationError(done.stderr.strip())
    if done.returncode != 0:
        log.debug("the schema migration's process failed (%s); the server migrates", done.returncode)


async def _open_once(db: str) -> None:
    store = store_for(db)
    await store.open()
    await store.close()


def main(argv: list[str]) -> int:
    """Open the store of ``argv[0]`` once (migrating it) and close it; :data:`REFUSED` with the message on
    stderr when the store refuses it."""
    try:
        asyncio.run(_open_once(argv[0]))
    except FerrymanError as exc:
        print(exc.message, file=sys.stderr)
        return REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
