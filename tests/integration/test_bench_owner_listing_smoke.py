"""``python -m bench.owner_listing`` runs end to end on SQLite at a tiny size (no timing is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.owner_listing import main

pytestmark = pytest.mark.integration


def test_owner_listing_writes_a_row_per_kind_and_auth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    assert main(["--others", "60", "--repeat", "3", "--only", "sqlite", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert {(row["backend"], row["path"], row["auth"], row["others"]) for row in rows} == {
        ("sqlite", kind, auth, 60)
        for kind in ("agent", "file", "vector_store", "conversation", "session", "response")
        for auth in ("on", "off")
    }
    assert all(row["median_ms"] > 0 and row["p95_ms"] >= row["median_ms"] for row in rows)
    printed = capsys.readouterr().out
    assert "| sqlite | agent | 60 |" in printed
    assert "| sqlite | file | 60 |" in printed
    assert "| sqlite | vector_store | 60 |" in printed
    assert "| sqlite | conversation | 60 |" in printed
    assert "| sqlite | session | 60 |" in printed
    assert "| sqlite | response | 60 |" in printed
