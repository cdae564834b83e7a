"""The benchmark harness runs end to end in its tiny mode and writes every expected figure.

Nothing here asserts a timing: only that each figure exists, has a unit and a
value, and was measured without errors.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from replicas import shared_state

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 600  # not a timing assertion: only stops a hung run from blocking the suite

pytestmark = pytest.mark.integration


def _expected_names(meta: dict[str, Any]) -> set[str]:
    concurrencies: list[int] = meta["concurrencies"]
    top = max(concurrencies)
    ref = 32 if 32 in concurrencies else top
    names = {
        "headline.overhead_ratio_p50",
        "headline.overhead_ratio_p99",
        "overhead.added_p50",
        f"headline.throughput_ratio_turn_c{ref}",
        f"headline.throughput_ratio_tool_turn_c{ref}",
        "streaming.first_event.p50",
        "streaming.first_event.p99",
        "streaming.turn_complete.p50",
        "streaming.turn_complete.p99",
        "client_tool.round_trip.p50",
        "client_tool.round_trip.p99",
        "client_tool.turn.p50",
        "client_tool.resume.p50",
        "listing.create_session_rate",
        "listing.list_first.p50",
        "listing.list_last.p99",
        "listing.get_session.p50",
        "memory.rss_idle",
        "memory.rss_after_sessions",
        "memory.rss_after_run",
        "history.turn_1",
        "history.direct_1",
        "history.added_1",
    }
    for scenario in ("direct", "turn", "tool_turn"):
        names.add(f"tail.{scenario}.c{top}")
        for c in concurrencies:
            names |= {f"throughput.{scenario}.c{c}", f"latency.{scenario}.c{c}.p50", f"latency.{scenario}.c{c}.p99"}
    return names


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run ``python -m bench --smoke`` once and load its JSON."""
    out = tmp_path_factory.mktemp("bench") / "smoke.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-6000:]}"
    assert "Headline" in done.stdout
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_meta_describes_the_machine(results: dict[str, Any]) -> None:
    meta = results["meta"]
    assert meta["mode"] == "smoke"
    assert meta["cores"] >= 1
    assert meta["python"].count(".") == 2
    assert meta["db_kind"] == "sqlite"


def test_every_expected_figure_is_there_with_a_unit_and_a_value(results: dict[str, Any]) -> None:
    figures = results["figures"]
    missing = _expected_names(results["meta"]) - set(figures)
    assert not missing, f"missing figures: {sorted(missing)}"
    for name, fig in figures.items():
        assert fig["unit"], name
        assert isinstance(fig["value"], int | float), name
        assert fig["min"] <= fig["value"] <= fig["max"], name
        assert len(fig["runs"]) >= 1, name


def test_no_operation_failed(results: dict[str, Any]) -> None:
    failed = {name: fig["error_kinds"] for name, fig in results["figures"].items() if fig["errors"]}
    assert not failed


def test_headline_figures_are_named(results: dict[str, Any]) -> None:
    assert "headline.overhead_ratio_p50" in results["headline"]
    assert any(name.startswith("headline.throughput_ratio_turn_") for name in results["headline"])


def test_with_api_keys_every_request_is_authenticated(tmp_path: Path) -> None:
    # Auth on: a request without the key would be a 401, counted as an error of its figure.
    out = tmp_path / "keys.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--api-keys", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-6000:]}"
    data = json.loads(out.read_text())
    assert data["meta"]["api_keys"].startswith("on")
    assert {name: fig["errors"] for name, fig in data["figures"].items() if fig["errors"]} == {}
    assert data["figures"]["throughput.turn.c1"]["value"] > 0


@pytest.fixture(scope="module")
def replica_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``python -m bench --smoke --replicas 2`` on a fresh PostgreSQL database and Redis prefix, once.

    Two repeats: a job with one worker moves to the next replica at its second window.
    """
    out = tmp_path_factory.mktemp("bench") / "replicas.json"
    with shared_state("postgres") as (db_url, redis_url):
        done = subprocess.run(
            [sys.executable, "-m", "bench", "--smoke", "--repeats", "2", "--replicas", "2",
             "--db", db_url, "--redis", redis_url, "--out", str(out)],
            cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,
        )  # fmt: skip
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-6000:]}"
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_two_replicas_give_every_figure_without_errors(replica_results: dict[str, Any]) -> None:
    meta, figures = replica_results["meta"], replica_results["figures"]
    assert (meta["replicas"], meta["db_kind"]) == (2, "postgresql")
    missing = _expected_names(meta) - set(figures)
    assert not missing, f"missing figures: {sorted(missing)}"
    assert {name: fig["error_kinds"] for name, fig in figures.items() if fig["errors"]} == {}
    assert "2 replicas summed" in figures["cpu.per_turn"]["label"]
    assert "max of 2 replicas" in figures["memory.rss_idle"]["label"]


def test_throughput_and_latency_jobs_reach_both_replicas(replica_results: dict[str, Any]) -> None:
    served: dict[str, list[int]] = replica_results["meta"]["info.ops_by_replica"]
    concurrencies = replica_results["meta"]["concurrencies"]
    jobs = [f"{scenario}.c{c}" for scenario in ("turn", "tool_turn") for c in concurrencies]
    idle = {job: served[job] for job in [*jobs, "stream", "client_tool"] if min(served[job]) == 0}
    assert not idle, f"replicas that served none of a job's operations: {idle}"
    assert not any(job.startswith("direct") for job in served)  # the stub's, not a replica's
