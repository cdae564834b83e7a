"""A resume reads its paused turn once, then resumes it in a write that reads its history and the agent's memory
blocks too, on every backend; a resume stored but never run puts its turn back as it was.

The blocks a resumed run shows are those of the claim's read (kept since the pause is not enough: they may have
changed meanwhile). When the run cannot be launched after the claim stored it, the turn awaits input again at once
(not running until its lease runs out) with the webhook of the run that paused it, and its ``Idempotency-Key``
is forgotten, so a repeat runs it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from storage_backends import BACKENDS, unopened_store

from ferryman.safe_fetch import FetchPolicy
from ferryman.server.app import build_services
from ferryman.services import turn_starts
from ferryman.services.webhooks import kept_webhook
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from ferryman.webhook_settings import WebhookSettings
from ferryman.webhooks.signing import new_secret
from inprocess import check_script, migrated_sqlite, serving

pytestmark = pytest.mark.anyio

WEATHER = {"name": "get_weather", "description": "weather", "parameters": []}
ANSWER = {"tool_responses": [{"call_id": "c1", "tool_name": "get_weather", "content": "sun"}], "stream": False}


def _broken(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("the run could not be launched")


class Paused:
    """A turn of a new agent's session, paused on a client tool call."""

    def __init__(self, http: httpx.AsyncClient, agent_id: str, session_id: str, turn_id: str) -> None:
        self.http, self.agent_id = http, agent_id
        self.url = f"/v1/agents/{agent_id}/session/{session_id}/turn/{turn_id}"

    async def resume(self, headers: dict[str, str] | None = None) -> httpx.Response:
        return await self.http.post(f"{self.url}/resume", json=ANSWER, headers=headers or {})

    async def status(self) -> str:
        turn = await self.http.get(self.url)
        assert turn.status_code == 200, turn.text
        return str(turn.json()["status"])


@pytest.fixture(params=list(BACKENDS))
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    model = ScriptedModel(model_ids=("scripted-model",))
    async with unopened_store(request.param, tmp_path) as store:
        async with serving(build_services(store, [model], sole_process=True)) as http:
            yield http, model
    check_script(request, model.script)


async def _paused(http: httpx.AsyncClient, model: ScriptedModel, webhook: str | None = None) -> Paused:
    config = {"model": "scripted-model", "instructions": "Be brief.", "client_tools": [WEATHER]}
    agent_id = (await http.post("/v1/agents", json={"agent_config": config})).json()["agent_id"]
    session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
    session_id = session.json()["session_id"]
    model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id="c1")]))
    body = {"messages": [{"role": "user", "content": "Weather?"}], "stream": False}
    if webhook is not None:
        body["webhook"] = webhook
    turn = await http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body)
    assert turn.status_code == 200 and turn.json()["status"] == "awaiting_input", turn.text
    return Paused(http, agent_id, session_id, turn.json()["turn_id"])


async def test_a_resumed_run_shows_the_memory_blocks_and_history_its_claim_read(
    served: tuple[httpx.AsyncClient, ScriptedModel],
) -> None:
    http, model = served
    paused = await _paused(http, model)
    put = await http.put(f"/v1/agents/{paused.agent_id}/memory/human", json={"value": "The user is Ada."})
    assert put.status_code == 200, put.text
    model.enqueue(ScriptedReply(text="Sunny, Ada."))

    answer = await paused.resume()

    assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
    messages = model.requests[-1]["messages"]
    assert "The user is Ada." in messages[0]["content"]
    assert [m["role"] for m in messages[1:]] == ["user", "assistant", "tool"]


async def test_a_resume_stored_but_never_run_puts_its_turn_back_and_forgets_its_key(
    served: tuple[httpx.AsyncClient, ScriptedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    http, model = served
    paused = await _paused(http, model)
    spans = turn_starts.start_turn_span
    monkeypatch.setattr(turn_starts, "start_turn_span", _broken)
    keyed = {"Idempotency-Key": "resume-once"}
    failed = await paused.resume(keyed)
    assert failed.status_code == 500, failed.text
    assert await paused.status() == "awaiting_input"

    monkeypatch.setattr(turn_starts, "start_turn_span", spans)
    model.enqueue(ScriptedReply(text="Sunny."))
    again = await paused.resume(keyed)
    assert again.status_code == 200 and again.json()["status"] == "completed", again.text


async def test_a_resume_put_back_keeps_the_webhook_of_the_run_that_paused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel(model_ids=("scripted-model",))
    store = SqliteStore(migrated_sqlite(tmp_path / "hook.db"))
    webhooks = WebhookSettings(secret=SecretStr(new_secret()), backoff_seconds=0.05, max_attempts=1)
    fetch = FetchPolicy(allowed_hosts=["127.0.0.1"])
    async with serving(build_services(store, [model], sole_process=True, fetch=fetch, webhooks=webhooks)) as http:
        paused = await _paused(http, model, webhook="http://127.0.0.1:9/paused-run")
        session_id, turn_id = paused.url.split("/")[-3], paused.url.split("/")[-1]
        before = kept_webhook((await store.get_turn_record(session_id, turn_id)).overrides)
        monkeypatch.setattr(turn_starts, "start_turn_span", _broken)
        failed = await http.post(f"{paused.url}/resume", json={**ANSWER, "webhook": "http://127.0.0.1:9/failed"})
        assert failed.status_code == 500, failed.text
        record = await store.get_turn_record(session_id, turn_id)
    assert record.status == "awaiting_input"
    assert before is not None and kept_webhook(record.overrides) == before
