"""``python -m bench --knowledge`` runs end to end at its tiny size and writes every expected figure.

Nothing here asserts a timing: only that each figure exists with a unit and a value.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 300  # not a timing assertion: only stops a hung run from blocking the suite

pytestmark = pytest.mark.integration


def test_knowledge_bench_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "knowledge.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--knowledge", "--smoke", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-6000:]}"
    figures = json.loads(out.read_text())["figures"]
    expected = {"knowledge.sqlite.n300.ingest", "knowledge.embed.local_minilm"} | {
        f"knowledge.sqlite.n300.{mode}.{stat}"
        for mode in ("keyword", "vector", "hybrid")
        for stat in ("cold", "p50", "p95")
    }
    assert expected <= set(figures), sorted(expected - set(figures))
    for name, fig in figures.items():
        assert fig["unit"], name
        assert isinstance(fig["value"], int | float) and fig["value"] > 0, name
