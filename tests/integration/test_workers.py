"""``ferryman serve --workers N``: several processes on one port over shared state, or a clear refusal."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from integration_helpers import run_turn
from replicas import shared_state

from ferryman.testing import ScriptedServerClient
from support import Proc, create_agent, create_session, ferryman_server, running


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ferryman.cli.main", "serve", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_several_workers_on_sqlite_are_refused_with_a_pointer_to_postgresql(tmp_path: Path) -> None:
    done = _serve("--workers", "2", "--db", str(tmp_path / "one.db"), "--inference-url", "http://127.0.0.1:9/v1")
    assert done.returncode == 2
    assert "SQLite serves one process" in done.stderr
    assert "--db postgresql://" in done.stderr and "--redis" in done.stderr
    assert not (tmp_path / "one.db").exists()


def test_several_workers_on_postgresql_without_redis_are_refused(tmp_path: Path) -> None:
    done = _serve("--workers", "2", "--db", "postgresql://nobody@127.0.0.1:9/none", "--inference-url", "http://x/v1")
    assert done.returncode == 2
    assert "--redis" in done.stderr


def test_two_workers_serve_one_port_as_one_server(
    tmp_path: Path, scripted_proc: tuple[Proc, str], served_model: ScriptedServerClient
) -> None:
    # Records in Redis: two workers over PostgreSQL serve turns in test_metrics_workers and test_json_log_process,
    # and each backend's records are shared by processes in test_replicas.
    with shared_state("redis") as (db_url, coordination):
        proc, base = ferryman_server(tmp_path, scripted_proc[1], db_url, "--redis", coordination, "--workers", "2")
        with running(proc), httpx.Client(base_url=base, timeout=30) as http:
            agent_id = create_agent(http)
            sessions = [create_session(http, agent_id, f"s{i}") for i in range(8)]
            for i in range(8):
                served_model.enqueue_text(f"answer {i}")
            with ThreadPoolExecutor(max_workers=8) as pool:
                turns = list(pool.map(lambda s: run_turn(http, agent_id, s, "question"), sessions))
            assert [t["status"] for t in turns] == ["completed"] * 8
            answers = sorted(t["output_message"]["content"] for t in turns)
            assert answers == sorted(f"answer {i}" for i in range(8))
            # Whichever worker answers, each session holds exactly its one turn.
            for session_id, turn in zip(sessions, turns, strict=True):
                stored = http.get(f"/v1/agents/{agent_id}/session/{session_id}").json()["turns"]
                assert [t["turn_id"] for t in stored] == [turn["turn_id"]]
