"""``GET /v1/usage`` on every backend: tokens and turns per agent, principal and model, exact, bounded and scoped.

Two API keys (alice, bob) run turns of two agents and responses on two models; a third
key (auditor) holds a policy grant on ``usage::*``. The scripted model reports 10 prompt
tokens per call and one output token per word of its reply, so every sum is known.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from storage_backends import unopened_store

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.auth.policy import ACTIONS, parse_policy
from ferryman.config import UsageSettings
from ferryman.server.app import Services, build_services
from ferryman.services import usage as usage_module
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from inprocess import check_script, serving

pytestmark = pytest.mark.anyio

POLICY: list[dict[str, Any]] = [
    {"permit": {"principal": "key:auditor", "actions": ["read"], "resource": "usage::*"}},
    {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
]
WEATHER = {
    "name": "get_weather",
    "description": "Weather",
    "parameters": [{"name": "city", "parameter_type": "string", "description": "City", "required": True}],
}
RECORDS = 6
"""The usage records the scenario makes: one per run (the paused turn's resume is a run of its own)."""


@dataclass
class Served:
    http: httpx.AsyncClient
    services: Services
    keys: dict[str, dict[str, str]]

    async def get(self, who: str, **params: Any) -> httpx.Response:
        return await self.http.get("/v1/usage", params=params, headers=self.keys[who])

    async def rows(self, who: str, **params: Any) -> list[tuple[str | None, int, int, int, int]]:
        answer = await self.get(who, **params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["object"] == "usage" and body["group_by"] == params.get("group_by", "agent")
        fields = ("key", "input_tokens", "output_tokens", "total_tokens", "turns")
        return [tuple(row[name] for name in fields) for row in body["data"]]


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Served, ScriptedModel]]:
    scripted = ScriptedModel(model_ids=("model-a", "model-b"))
    async with unopened_store(request.param, tmp_path) as store:
        keys = ApiKeys(store.kernel)
        services = build_services(
            store,
            [scripted],
            authenticator=BearerAuthenticator(ApiKeyAuthenticator(keys), None),
            policy=parse_policy(POLICY),
            usage=UsageSettings(max_records=RECORDS),
        )
        async with serving(services) as http:
            bearer = {}
            for name in ("alice", "bob", "auditor"):
                key = new_key()
                await keys.create(key_record(name, key, {}))
                bearer[name] = {"Authorization": f"Bearer {key}"}
            yield Served(http, services, bearer), scripted
    check_script(request, scripted.script)


async def _settled(services: Services) -> None:
    """Once no run is live: each ended and stored its outcome and usage (woken by the runs, no polling)."""
    runner = services.runner
    async with asyncio.timeout(30):
        while live := [run for turn_id in runner.running() if (run := runner.run(turn_id))]:
            await asyncio.gather(*(run.settled.wait() for run in live))


async def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def _session(served: Served, who: str, model: str, **config: Any) -> tuple[str, str]:
    headers = served.keys[who]
    body = {"agent_config": {"model": model, "instructions": "Be brief.", **config}}
    agent_id = (await _ok(await served.http.post("/v1/agents", json=body, headers=headers)))["agent_id"]
    session = await served.http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}, headers=headers)
    return agent_id, (await _ok(session))["session_id"]


async def _turn(served: Served, who: str, agent_id: str, session_id: str) -> dict[str, Any]:
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    turn = await _ok(await served.http.post(url, json=body, headers=served.keys[who]))
    await _settled(served.services)
    return turn


async def _response(served: Served, who: str, model: str) -> None:
    body = {"model": model, "input": "hi"}
    assert (await _ok(await served.http.post("/v1/responses", json=body, headers=served.keys[who])))["status"] == (
        "completed"
    )
    await _settled(served.services)


@dataclass
class Scenario:
    x: str
    y: str
    start: float
    middle: float


async def _run_scenario(served: Served, scripted: ScriptedModel) -> Scenario:
    """alice: a turn of agent x, then a paused and resumed turn of x, then a response on model-b;
    bob: a turn of agent y (model-b) and a response on model-a."""
    x, x_session = await _session(served, "alice", "model-a", client_tools=[WEATHER])
    y, y_session = await _session(served, "bob", "model-b")
    start = time.time()
    scripted.enqueue(ScriptedReply(text="one two three"))
    assert (await _turn(served, "alice", x, x_session))["status"] == "completed"
    middle = time.time()
    call = ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}, call_id="c1")
    scripted.enqueue(ScriptedReply(text="let me check", tool_calls=[call]), ScriptedReply(text="sunny in Paris"))
    paused = await _turn(served, "alice", x, x_session)
    assert paused["status"] == "awaiting_input"
    resume = {"tool_responses": [{"call_id": "c1", "tool_name": "get_weather", "content": "sunny"}], "stream": False}
    url = f"/v1/agents/{x}/session/{x_session}/turn/{paused['turn_id']}/resume"
    assert (await _ok(await served.http.post(url, json=resume, headers=served.keys["alice"])))["status"] == "completed"
    await _settled(served.services)
    scripted.enqueue(ScriptedReply(text="a b c d e"), ScriptedReply(text="x y"), ScriptedReply(text="p"))
    assert (await _turn(served, "bob", y, y_session))["status"] == "completed"
    await _response(served, "bob", "model-a")
    await _response(served, "alice", "model-b")
    return Scenario(x, y, start, middle)


async def test_usage_is_summed_exactly_per_agent_principal_and_model_within_the_range(
    served: tuple[Served, ScriptedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, scripted = served
    monkeypatch.setattr(usage_module, "PAGE_SIZE", 2)  # the summaries read several pages
    s = await _run_scenario(app, scripted)
    since = {"since": str(s.start)}

    # The resumed turn counts once, its two runs' tokens both: x holds 3 runs, 2 turns.
    assert await app.rows("auditor", **since) == [(s.x, 30, 9, 39, 2), (None, 20, 3, 23, 2), (s.y, 10, 5, 15, 1)]
    by_principal = await app.rows("auditor", group_by="principal", **since)
    assert by_principal == [("key:alice", 40, 10, 50, 3), ("key:bob", 20, 7, 27, 2)]
    by_model = await app.rows("auditor", group_by="model", **since)
    assert by_model == [("model-a", 40, 11, 51, 3), ("model-b", 20, 6, 26, 2)]

    # since and until bound the range (ISO 8601 or epoch seconds): before, between and after the first turn.
    middle_iso = datetime.fromtimestamp(s.middle, UTC).isoformat()
    assert await app.rows("auditor", since=middle_iso) == [
        (s.x, 20, 6, 26, 1),
        (None, 20, 3, 23, 2),
        (s.y, 10, 5, 15, 1),
    ]
    assert await app.rows("auditor", until=str(s.middle), **since) == [(s.x, 10, 3, 13, 1)]
    assert await app.rows("auditor", since="1970-01-01", until=str(s.start)) == []

    # Without a grant, each caller sums its own runs only.
    assert await app.rows("alice", **since) == [(s.x, 30, 9, 39, 2), (None, 10, 1, 11, 1)]
    assert await app.rows("bob", group_by="principal", **since) == [("key:bob", 20, 7, 27, 2)]
    assert await app.rows("bob", group_by="model", **since) == [("model-b", 10, 5, 15, 1), ("model-a", 10, 2, 12, 1)]


async def test_a_range_over_max_records_is_refused_naming_the_setting(
    served: tuple[Served, ScriptedModel],
) -> None:
    app, scripted = served
    s = await _run_scenario(app, scripted)
    app.services.usage.max_records = RECORDS - 1
    refused = await app.get("auditor", group_by="model", since=str(s.start))
    assert refused.status_code == 400
    assert (
        "usage.max_records" in refused.json()["error"]["message"] and "narrower" in refused.json()["error"]["message"]
    )
    # A narrower range, or a caller that reads fewer records, stays within it.
    assert len(await app.rows("auditor", since=str(s.middle))) == 3
    assert await app.rows("alice", group_by="principal", since=str(s.start)) == [("key:alice", 40, 10, 50, 3)]


async def test_the_range_defaults_to_today_and_bad_parameters_are_refused(
    served: tuple[Served, ScriptedModel],
) -> None:
    app, _ = served
    before = datetime.now(UTC).date()
    body = await _ok(await app.get("alice"))
    after = datetime.now(UTC).date()
    since = datetime.fromisoformat(body["since"])
    assert since.date() in (before, after) and (since.hour, since.minute, since.second) == (0, 0, 0)
    assert datetime.fromisoformat(body["until"]) >= since and body["data"] == []
    for params in (
        {"group_by": "team"},
        {"since": "yesterday"},
        {"since": "1e300"},
        {"since": "-5"},
        {"since": "nan"},
        {"since": "2024-02-01", "until": "2024-01-01"},
    ):
        refused = await app.get("alice", **params)
        assert refused.status_code == 400, params
    assert (await app.http.get("/v1/usage")).status_code == 401
