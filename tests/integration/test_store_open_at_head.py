"""A store opened on a database already at the newest revision reads its version and loads no Alembic.

A replica restarting on its database (the usual start) keeps about 10 MiB less for good. Each open runs in a
process of its own, since the migration of a fresh database (the first open) does load Alembic.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import pytest
from storage_backends import POSTGRES_URL, postgres_store

from ferryman.storage.sql.migrate import HEAD

pytestmark = pytest.mark.anyio

OPEN = textwrap.dedent(
    """
    import asyncio, sys
    from ferryman.storage.sql.{module} import {store}

    async def main():
        store = {store}({args})
        await store.open()
        await store.close()

    asyncio.run(main())
    print(sorted(name for name in sys.modules if name == "alembic" or name.startswith("alembic.")))
    """
)


def _open(module: str, store: str, args: str) -> subprocess.CompletedProcess[str]:
    script = OPEN.format(module=module, store=store, args=args)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)


def _opened_loads(module: str, store: str, args: str) -> str:
    run = _open(module, store, args)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_a_sqlite_file_at_head_opens_without_alembic_and_a_new_one_is_migrated(tmp_path: Path) -> None:
    path = repr(str(tmp_path / "at_head.db"))
    assert _opened_loads("sqlite", "SqliteStore", path) != "[]"  # made and migrated
    assert _opened_loads("sqlite", "SqliteStore", path) == "[]"


async def test_a_postgres_schema_at_head_opens_without_alembic(tmp_path: Path) -> None:
    async with postgres_store(tmp_path) as migrated:
        schema = migrated._db._schema  # type: ignore[attr-defined]
        assert _opened_loads("postgres", "PostgresStore", f"{POSTGRES_URL!r}, schema={schema!r}") == "[]"


def test_a_sqlite_file_recording_another_revision_beside_head_is_left_to_alembic(tmp_path: Path) -> None:
    path = tmp_path / "two_heads.db"
    assert _opened_loads("sqlite", "SqliteStore", repr(str(path))) != "[]"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("INSERT INTO alembic_version (version_num) VALUES ('9999_not_ours')")
    refused = _open("sqlite", "SqliteStore", repr(str(path)))
    assert refused.returncode != 0
    assert "Can't locate revision identified by '9999_not_ours'" in refused.stderr


def test_a_sqlite_file_whose_name_holds_url_characters_is_the_one_migrated(tmp_path: Path) -> None:
    path = tmp_path / "odd?name#1.db"
    assert _opened_loads("sqlite", "SqliteStore", repr(str(path))) != "[]"
    assert sorted(file.name for file in tmp_path.iterdir() if file.suffix == ".db" or "?" in file.name) == [path.name]
    with closing(sqlite3.connect(path)) as conn:
        assert [row[0] for row in conn.execute("SELECT version_num FROM alembic_version")] == [HEAD]
