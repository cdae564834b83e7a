"""Webhooks across real server processes: deliveries pending at a restart are made by the next process, two
replicas over PostgreSQL and Redis post each event once, and a replica killed mid-run has its runs' failures
posted by the survivor that fails them.

The secret is the one the server generated into its store, read from the database with
``ferryman webhooks secret``; the deliveries are read with ``ferryman webhooks deliveries --json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from integration_helpers import gate_name, iter_frames, open_gate_finally, run_turn, turn_url, user, wait_for
from replicas import replicas, shared_state

from ferryman.testing import ScriptedReply, ScriptedServerClient
from support import Proc, create_agent, create_session, ferryman_server, free_port, running
from webhook_receiver import receiving

CONFIG = """\
fetch:
  allowed_hosts: ["127.0.0.1"]
webhooks:
  backoff_seconds: 0.5
  max_backoff_seconds: 1
  max_attempts: 100
  poll_seconds: 0.5
"""


def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "webhooks.yaml"
    path.write_text(CONFIG)
    return path


def cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ferryman.cli.main", *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def read_secret(pool: ThreadPoolExecutor, config: Path, db: str) -> Future[str]:
    """``ferryman webhooks secret`` in the background: its process starts while the test waits on the servers."""
    return pool.submit(lambda: cli("webhooks", "secret", "--config", str(config), "--db", db).strip())


def deliveries(base: str) -> list[dict[str, Any]]:
    """The deliveries a server lists (over HTTP: polled; the CLI is checked against it once)."""
    found: list[dict[str, Any]] = httpx.get(f"{base}/v1/webhook_deliveries", timeout=30).json()["data"]
    return found


def cli_deliveries(base: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(cli("webhooks", "deliveries", "--json", "--url", base))
    return found


def hook_turn(http: httpx.Client, agent_id: str, session_id: str, text: str, webhook: str) -> dict[str, Any]:
    return run_turn(http, agent_id, session_id, text, webhook=webhook)


def test_deliveries_pending_at_a_restart_are_made_by_the_next_process(
    tmp_path: Path, scripted_proc: tuple[Proc, str], served_model: ScriptedServerClient
) -> None:
    config = config_file(tmp_path)
    port = free_port()  # nothing listens there until the server restarted: every attempt before fails
    webhook = f"http://127.0.0.1:{port}/hooks"
    proc, base = ferryman_server(tmp_path, scripted_proc[1], tmp_path / "hooks.db", "--config", str(config))
    with running(proc), ThreadPoolExecutor(1) as pool:
        secret = read_secret(pool, config, str(tmp_path / "hooks.db"))  # generated into the store at the start
        with httpx.Client(base_url=base, timeout=30) as http:
            agent_id = create_agent(http)
            session_id = create_session(http, agent_id)
            served_model.enqueue_text("Done.")
            turn = hook_turn(http, agent_id, session_id, "Go", webhook)
        failed = wait_for(lambda: [d for d in deliveries(base) if d["attempts"]] or None, what="a failed attempt")
        assert failed[0]["status"] == "pending" and failed[0]["attempts"][0].get("status_code") is None
        proc.stop()
        with receiving(port=port) as receiver:
            proc.start()
            (posted,) = receiver.wait_for(1)
            event = posted.verified(secret.result())
            delivered = wait_for(
                lambda: [d for d in deliveries(base) if d["status"] == "delivered"] or None, what="the delivery"
            )
            assert cli_deliveries(base) == delivered
    assert event["type"] == "turn.completed" and event["data"]["turn_id"] == turn["turn_id"]
    assert posted.headers["webhook-id"] == delivered[0]["id"] == failed[0]["id"]
    assert delivered[0]["attempts"][-1]["status_code"] == 200 and len(delivered[0]["attempts"]) >= 2


@pytest.mark.parametrize("state", ["postgres"])
def test_two_replicas_post_each_event_once(
    state: str, tmp_path: Path, scripted_proc: tuple[Proc, str], served_model: ScriptedServerClient
) -> None:
    config = config_file(tmp_path)
    with shared_state(state) as (db_url, coordination), receiving() as receiver:
        pair = replicas(2, tmp_path, scripted_proc[1], db_url, coordination, "--config", str(config))
        try:
            with httpx.Client(base_url=pair[0][1], timeout=30) as a, httpx.Client(base_url=pair[1][1], timeout=30) as b:
                agent_id = create_agent(a)
                session_id = create_session(a, agent_id)
                turns = []
                for index in range(6):
                    served_model.enqueue_text(f"Answer {index}.")
                    turns.append(hook_turn((a, b)[index % 2], agent_id, session_id, f"Question {index}", receiver.url))
            posts = receiver.wait_for(len(turns))
            done = wait_for(
                lambda: (found := deliveries(pair[1][1])) and all(d["status"] == "delivered" for d in found) and found,
                what="every delivery delivered",
            )
        finally:
            for proc, _ in pair:
                proc.stop()
    assert sorted(d["run_id"] for d in done) == sorted(t["turn_id"] for t in turns)
    assert all(len(d["attempts"]) == 1 for d in done)
    assert len(receiver.posted) == len(posts) == len(turns)
    assert len({p.headers["webhook-id"] for p in receiver.posted}) == len(turns)


@pytest.mark.parametrize("state", ["postgres", "redis"])
def test_a_killed_replicas_runs_are_failed_by_the_survivor_and_posted_once(
    state: str, tmp_path: Path, scripted_proc: tuple[Proc, str], served_model: ScriptedServerClient
) -> None:
    config = config_file(tmp_path)
    with shared_state(state) as (db_url, coordination), receiving() as receiver, ExitStack() as stack:
        pair = replicas(2, tmp_path, scripted_proc[1], db_url, coordination, "--config", str(config))
        for proc, _ in pair:
            stack.callback(proc.stop)
        secret = read_secret(stack.enter_context(ThreadPoolExecutor(1)), config, db_url)
        (doomed, a_base), (_, b_base) = pair
        a = stack.enter_context(httpx.Client(base_url=a_base, timeout=30))
        # A turn a client streams from a, and a background response, each held at its model call on a.
        gates = [stack.enter_context(open_gate_finally(served_model, gate_name())) for _ in range(2)]
        served_model.enqueue(ScriptedReply(text="Never said.", gate=gates[0]))
        served_model.enqueue(ScriptedReply(text="Never said either.", gate=gates[1]))
        agent_id = create_agent(a)
        session_id = create_session(a, agent_id)
        body = {"messages": [user("Go")], "stream": True, "webhook": receiver.url}
        streamed = stack.enter_context(a.stream("POST", turn_url(agent_id, session_id), json=body))
        turn_id = next(iter_frames(streamed))[1]["event"]["payload"]["turn_id"]
        body = {"model": "scripted-model", "input": "Go", "background": True, "webhook": receiver.url}
        response_id = a.post("/v1/responses", json=body).json()["id"]
        served_model.wait_for_requests(2)
        doomed.kill()

        posts = receiver.wait_for(2)
        done = wait_for(
            lambda: (found := deliveries(b_base)) and all(d["status"] == "delivered" for d in found) and found,
            what="both deliveries delivered",
        )
    events = {event["type"]: event["data"] for event in (posted.verified(secret.result()) for posted in posts)}
    assert set(events) == {"turn.failed", "response.failed"}
    assert events["turn.failed"]["turn_id"] == turn_id and events["turn.failed"]["error"]["code"] == "interrupted"
    assert events["response.failed"]["id"] == response_id
    assert events["response.failed"]["error"]["code"] == "interrupted"
    assert sorted(d["run_id"] for d in done) == sorted([turn_id, response_id])
    assert all(len(d["attempts"]) == 1 for d in done)
    assert len(receiver.posted) == 2
