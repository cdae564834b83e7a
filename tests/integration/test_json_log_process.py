"""``ferryman serve --log-format json``: every line a real server writes, workers and uvicorn included, is JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
from integration_helpers import run_turn
from replicas import shared_state

from ferryman.testing import ScriptedServerClient
from support import Proc, create_agent, create_session, ferryman_server, running

STARTED_WORKER = re.compile(r"Started server process \[(\d+)\]")


def test_every_line_of_two_workers_and_their_parent_is_json(
    tmp_path: Path, scripted_proc: tuple[Proc, str], served_model: ScriptedServerClient
) -> None:
    with shared_state("postgres") as (db_url, coordination):
        options = ("--redis", coordination, "--workers", "2", "--log-level", "info", "--log-format", "json")
        proc, base = ferryman_server(tmp_path, scripted_proc[1], db_url, *options)
        with running(proc), httpx.Client(base_url=base, timeout=30) as http:
            agent_id = create_agent(http)
            session_id = create_session(http, agent_id)
            served_model.enqueue_text("hello")
            http.headers["X-Request-ID"] = "json-turn-1"
            turn = run_turn(http, agent_id, session_id, "hi")
            assert turn["status"] == "completed"
    text = proc.log.read_text(encoding="utf-8")
    records: list[dict[str, Any]] = [json.loads(line) for line in text.splitlines()]  # each line, or it fails
    loggers = {record["logger"] for record in records}
    assert {"uvicorn.error", "ferryman.access", "ferryman.turns"} <= loggers, loggers
    workers = {m.group(1) for r in records if (m := STARTED_WORKER.search(r["message"]))}
    assert len(workers) == 2  # both workers logged their start, in JSON
    assert any("parent process" in record["message"] for record in records)
    [access] = [r for r in records if r["logger"] == "ferryman.access" and r["request_id"] == "json-turn-1"]
    assert (access["route"], access["status"]) == ("/v1/agents/{agent_id}/session/{session_id}/turn", 200)
    lifecycle = [r for r in records if r["logger"] == "ferryman.turns" and r["request_id"] == "json-turn-1"]
    assert [(r["event"], r["turn_id"], r["agent_id"]) for r in lifecycle] == [
        ("turn_started", turn["turn_id"], agent_id),
        ("turn_finished", turn["turn_id"], agent_id),
    ]
