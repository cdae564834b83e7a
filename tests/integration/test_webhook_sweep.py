"""Webhooks of runs ended by another process than the one running them, in this process, on SQLite.

The run's webhook is stored with it, so the process that fails a dead one's
run (the lease sweep; on SQLite, the next process at its start) queues the same
event; the dead run's own end, should it come after all (a process that only
stalled), is the same delivery, refused as a duplicate. The approval inbox's
continuation of a paused run posts to the webhook of the run that paused.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from ferryman.api.agents import CreateTurnRequest
from ferryman.api.content import UserMessage
from ferryman.cli import main as cli
from ferryman.safe_fetch import FetchPolicy
from ferryman.server.app import Services, build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel
from ferryman.webhook_settings import WebhookSettings
from ferryman.webhooks.signing import new_secret
from inprocess import migrated_sqlite, serving
from webhook_receiver import Posted, Receiver, receiving

pytestmark = pytest.mark.anyio

SECRET = new_secret()
MODEL = "scripted-model"
WAIT_SECONDS = 30.0


@asynccontextmanager
async def replica(
    db: str, model: ScriptedModel, sole_process: bool, secret: str | None = SECRET
) -> AsyncIterator[tuple[httpx.AsyncClient, Services]]:
    """A process of ferryman over the SQLite file ``db``, its lifespan running (at start, a sole process fails
    every run the file holds as running); ``secret`` None: the one generated into the store."""
    services = build_services(
        SqliteStore(db),
        [model],
        sole_process=sole_process,
        fetch=FetchPolicy(allowed_hosts=["127.0.0.1"]),
        webhooks=WebhookSettings(
            secret=None if secret is None else SecretStr(secret), backoff_seconds=0.05, max_attempts=3
        ),
    )
    async with serving(services) as http:
        yield http, services


async def received(receiver: Receiver, count: int) -> list[Posted]:
    return await asyncio.to_thread(receiver.wait_for, count)


async def delivered(processes: list[Services], count: int) -> list[dict[str, Any]]:
    """The deliveries, once ``count`` are delivered (woken by each attempt either process's worker records, no
    polling: either may post a delivery)."""
    recorded = [services.webhooks.worker.recorded for services in processes]
    async with asyncio.timeout(WAIT_SECONDS):
        while True:
            for event in recorded:
                event.clear()
            page = await processes[0].webhooks.list(None, order="asc")
            if sum(d.status == "delivered" for d in page.data) >= count:
                return [d.model_dump(mode="json") for d in page.data]
            waits = [asyncio.ensure_future(event.wait()) for event in recorded]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()


async def test_runs_a_dead_process_left_are_failed_by_the_next_and_posted_once(tmp_path: Path) -> None:
    db = migrated_sqlite(tmp_path / "hooks.db")
    dead_model = ScriptedModel()
    dead_model.enqueue_text("Never stored.", gate="turn")
    dead_model.enqueue_text("Never stored either.", gate="response")
    with receiving() as receiver:
        async with replica(db, dead_model, sole_process=True) as (http, dead):
            agent = await http.post("/v1/agents", json={"agent_config": {"model": MODEL, "instructions": "Brief."}})
            agent_id = agent.json()["agent_id"]
            session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
            session_id = session.json()["session_id"]
            request = CreateTurnRequest(messages=[UserMessage(content="Hi")], stream=False, webhook=receiver.url)
            turn = await dead.agents.start_turn(agent_id, session_id, request)
            body = {"model": MODEL, "input": "Hello", "background": True, "webhook": receiver.url}
            response = (await http.post("/v1/responses", json=body)).json()
            await dead_model.script.wait_for_requests(2)  # both run, each held at its model call

            # The next process starts while they run (as if this one had died): it fails both, and posts that.
            async with replica(db, ScriptedModel(), sole_process=True) as (next_http, survivor):
                posts = await received(receiver, 2)
                events = {p.verified(SECRET)["type"]: p.verified(SECRET)["data"] for p in posts}
                assert set(events) == {"turn.failed", "response.failed"}
                assert events["turn.failed"]["turn_id"] == turn.turn_id
                assert events["turn.failed"]["error"]["code"] == "interrupted"
                failed_turn = await next_http.get(f"/v1/agents/{agent_id}/session/{session_id}/turn/{turn.turn_id}")
                assert events["turn.failed"] == failed_turn.json()
                assert events["response.failed"]["id"] == response["id"]
                assert events["response.failed"]["error"]["code"] == "interrupted"

                # The first process was only stalled: its runs end now, and their webhooks are the same deliveries.
                runs = [run for run_id in dead.runner.running() if (run := dead.runner.run(run_id)) is not None]
                assert len(runs) == 2
                dead_model.script.open_gate("turn")
                dead_model.script.open_gate("response")
                async with asyncio.timeout(WAIT_SECONDS):
                    await asyncio.gather(*(run.settled.wait() for run in runs))
                deliveries = await delivered([survivor, dead], 2)
    assert sorted((d["run_id"], d["type"]) for d in deliveries) == sorted(
        [(turn.turn_id, "turn.failed"), (response["id"], "response.failed")]
    )
    assert all(len(d["attempts"]) == 1 for d in deliveries)
    assert len(receiver.posted) == 2
    assert {p.headers["webhook-id"] for p in receiver.posted} == {d["id"] for d in deliveries}


async def test_a_run_the_approval_inbox_continues_posts_to_the_webhook_of_the_run_that_paused(tmp_path: Path) -> None:
    model = ScriptedModel()
    model.enqueue_tool_call("calculator", {"expression": "6 * 7"})
    model.enqueue_text("42.")
    config = {"model": MODEL, "instructions": "Brief.", "toolgroups": ["builtin::math"], "require_approval": "always"}
    with receiving() as receiver:
        async with replica(migrated_sqlite(tmp_path / "inbox.db"), model, sole_process=True) as (http, _):
            agent_id = (await http.post("/v1/agents", json={"agent_config": config})).json()["agent_id"]
            session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
            url = f"/v1/agents/{agent_id}/session/{session.json()['session_id']}/turn"
            body = {"messages": [{"role": "user", "content": "6 * 7?"}], "stream": False, "webhook": receiver.url}
            paused = (await http.post(url, json=body)).json()
            assert paused["status"] == "awaiting_input", paused
            (held,) = (await http.get("/v1/approvals")).json()["data"]
            assert (await http.post(f"/v1/approvals/{held['id']}/approve")).status_code == 202
            first, second = await received(receiver, 2)
    events = [posted.verified(SECRET) for posted in (first, second)]
    assert [event["type"] for event in events] == ["turn.awaiting_input", "turn.completed"]
    assert events[1]["data"]["turn_id"] == paused["turn_id"]
    assert events[1]["data"]["output_message"]["content"] == "42."
    assert first.headers["webhook-id"] != second.headers["webhook-id"]


async def test_replicas_with_their_own_homes_sign_with_the_one_secret_generated_into_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = migrated_sqlite(tmp_path / "shared.db")
    assert await asyncio.to_thread(cli.main, ["webhooks", "secret", "--db", db]) == 1  # none yet, and none made
    assert "no webhook secret yet" in capsys.readouterr().err
    model = ScriptedModel()
    with receiving() as receiver, ExitStack() as homes:
        clients = []
        async with AsyncExitStack() as stack:
            for home in ("a", "b"):  # each replica on its own machine: FERRYMAN_HOME is not shared
                homes.enter_context(monkeypatch.context()).setenv("FERRYMAN_HOME", str(tmp_path / home))
                http, _ = await stack.enter_async_context(replica(db, model, sole_process=False, secret=None))
                clients.append(http)
            for index, http in enumerate(clients):
                model.enqueue_text(f"Hello {index}.")
                body = {"model": MODEL, "input": "Hi", "webhook": receiver.url}
                assert (await http.post("/v1/responses", json=body)).status_code == 200
            posts = await received(receiver, 2)
    assert await asyncio.to_thread(cli.main, ["webhooks", "secret", "--db", db]) == 0
    secret = capsys.readouterr().out.strip()
    assert [p.verified(secret)["type"] for p in posts] == ["response.completed"] * 2
