"""``ferryman serve`` brings its database to head in a child process, so that the server never holds Alembic.

That the serving process imports no Alembic is checked with the rest of its footprint
(``test_idle_footprint.py``); here, what the child does and what the parent makes of it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from legacy_schema import build_sqlite
from replicas import postgres_database

from ferryman.cli import migrate_apart as apart
from ferryman.storage.sql.migrate import HEAD, sqlite_versions
from support import free_port

_PROBE = """
import json, sys
from ferryman.cli.migrate_apart import migrate_apart
migrate_apart(sys.argv[1])
print(json.dumps({"alembic": "alembic" in sys.modules}))
"""


def _migrated_apart(db: str) -> bool:
    """Run :func:`migrate_apart` on ``db`` in a fresh process; whether that process imported Alembic."""
    done = subprocess.run([sys.executable, "-c", _PROBE, db], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded: bool = json.loads(done.stdout.splitlines()[-1])["alembic"]
    return loaded


def test_a_new_sqlite_file_is_brought_to_head_by_a_child(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    assert _migrated_apart(str(path)) is False
    assert sqlite_versions(str(path)) == [HEAD]


def test_a_new_postgres_database_is_brought_to_head_by_a_child() -> None:
    with postgres_database() as url:
        assert apart.at_head(url) is False
        assert _migrated_apart(url) is False
        assert apart.at_head(url) is True


def test_a_database_at_head_starts_no_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "head.db")
    assert _migrated_apart(path) is False

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a child was started for a database at head")

    monkeypatch.setattr(apart.subprocess, "run", refuse)
    apart.migrate_apart(path)
    apart.migrate_apart("redis://127.0.0.1:6379/0")  # Redis's layout is the store's own


def test_a_child_that_fails_leaves_the_database_to_the_servers_own_open() -> None:
    # Nothing listens on the discard port: the child fails to connect, and the server's open would say so.
    apart.migrate_apart("postgresql://postgres@127.0.0.1:9/none")


def test_a_database_too_old_to_adopt_is_refused_in_one_line_before_the_server_starts(tmp_path: Path) -> None:
    path = tmp_path / "early.db"
    build_sqlite(path, up_to=4).close()
    command = [sys.executable, "-m", "ferryman.cli.main", "serve", "--db", str(path)]
    command += ["--inference-url", "http://127.0.0.1:9/v1", "--port", str(free_port())]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    refusal = done.stderr.strip()
    assert refusal.startswith("ferryman: the database is at schema version 4 of an early ferryman, too old")
    assert "\n" not in refusal
    with sqlite3.connect(path) as conn:  # left as it was
        assert [row[0] for row in conn.execute("SELECT max(version) FROM schema_migrations")] == [4]
