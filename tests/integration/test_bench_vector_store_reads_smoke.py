"""``python -m bench.vector_store_reads`` runs end to end on SQLite at a tiny size (no timing is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.vector_store_reads import main

pytestmark = pytest.mark.integration


def test_vector_store_reads_writes_a_row_per_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    assert main(["--stores", "3", "--files", "12", "--repeat", "2", "--only", "sqlite", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [(row["backend"], row["call"], row["stores"], row["files"]) for row in rows] == [
        ("sqlite", call, 3, 12) for call in ("get", "list", "search")
    ]
    assert all(row["median_ms"] > 0 and row["p95_ms"] >= row["median_ms"] for row in rows)
    assert "| sqlite | search | 3 x 12 |" in capsys.readouterr().out
