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
from ferryman.errors import ConfigurationError
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
        assert apart.behind(url) is True
        assert _migrated_apart(url) is False
        assert apart.behind(url) is False


def test_what_is_not_known_to_be_behind_starts_no_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "head.db")
    assert _migrated_apart(path) is False

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a child was started")

    monkeypatch.setattr(apart.subprocess, "run", refuse)
    apart.migrate_apart(path)  # at head
    apart.migrate_apart(":memory:")  # nothing to keep: the server's own store migrates it
    apart.migrate_apart("redis://127.0.0.1:6379/0")  # Redis's layout is the store's own
    # Nothing listens on the discard port: the server's own open says so, once.
    apart.migrate_apart("postgresql://postgres@127.0.0.1:9/none")


def test_the_database_goes_to_the_child_on_its_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[list[str], str]] = []

    def run(command: list[str], *, input: bytes, **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        seen.append((command, input.decode()))
        return subprocess.CompletedProcess(command, 0, b"", b"")

    url = "postgresql://user:s3cret@db.example/app"
    monkeypatch.setattr(apart, "behind", lambda db: True)
    monkeypatch.setattr(apart.subprocess, "run", run)
    apart.migrate_apart(url)
    [(command, given)] = seen
    assert given == url and not any("s3cret" in part for part in command)
    assert command[1:] == ["-P", "-m", "ferryman.cli.migrate_apart"]


@pytest.mark.parametrize(
    ("status", "stderr", "refusal"),
    [
        (2, "a warning first\nthe database was refused\n", "the database was refused"),
        (1, "Traceback (most recent call last): ...", None),  # left to the server's own open
        (-9, "", None),
    ],
)
def test_a_refusal_is_the_parents_and_any_other_failure_the_servers(
    monkeypatch: pytest.MonkeyPatch, status: int, stderr: str, refusal: str | None
) -> None:
    def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        return subprocess.CompletedProcess(command, status, b"", stderr.encode())

    monkeypatch.setattr(apart, "behind", lambda db: True)
    monkeypatch.setattr(apart.subprocess, "run", run)
    if refusal is None:
        apart.migrate_apart("x.db")
    else:
        with pytest.raises(ConfigurationError) as refused:
            apart.migrate_apart("x.db")
        assert refused.value.message == refusal


def test_a_database_too_old_to_adopt_is_refused_in_one_line_before_the_server_starts(tmp_path: Path) -> None:
    path = tmp_path / "early.db"
    build_sqlite(path, up_to=4).close()
    command = [sys.executable, "-m", "ferryman.cli.main", "serve", "--db", str(path)]
    command += ["--inference-url", "http://127.0.0.1:9/v1", "--port", str(free_port())]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "ferryman: the database is at schema version 4 of an early ferryman, too old to upgrade here "
        "(versions 5-6 are): open it once with a release from before Alembic first\n"
    )
    with sqlite3.connect(path) as conn:  # left as it was
        assert [row[0] for row in conn.execute("SELECT max(version) FROM schema_migrations")] == [4]
