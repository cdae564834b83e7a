"""``GET /metrics``: Prometheus's text after known traffic, parsed with prometheus_client's parser; who may read it.

In process, over the scripted model (each answer: 10 input tokens, one output token a word) and a
SQLite file. The registry is the test process's: each test compares the scrapes before and after.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from integration_helpers import turn_url, user
from metrics_support import delta, key, samples

from ferryman.auth.policy import parse_policy
from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.auth.quotas import quotas_for
from ferryman.errors import AuthenticationError
from ferryman.quota_settings import QuotaSettings
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel
from inprocess import check_script, serving
from shield_standins import WordShield, unique

pytestmark = pytest.mark.anyio

MODEL = "scripted-model"
ALICE = Principal(PrincipalKind.SUBJECT, "alice")
TOKENS = {"scraper": Principal(PrincipalKind.API_KEY, "scraper"), "alice": ALICE}
GRANT = [{"permit": {"principal": "key:scraper", "actions": ["read"], "resource": "metrics::server"}}]


class StaticTokens:
    """Two fixed bearer tokens: the scraper's API key and alice's."""

    async def authenticate(self, credential: str) -> Principal:
        try:
            return TOKENS[credential]
        except KeyError:
            raise AuthenticationError() from None


@pytest.fixture()
def model(request: pytest.FixtureRequest) -> AsyncIterator[ScriptedModel]:
    scripted = ScriptedModel()
    yield scripted  # type: ignore[misc]
    check_script(request, scripted.script)


@asynccontextmanager
async def _server(tmp: Path, model: ScriptedModel, **options: Any) -> AsyncIterator[httpx.AsyncClient]:
    services = build_services(SqliteStore(str(tmp / "ferryman.db")), [model], sole_process=True, **options)
    async with serving(services) as http:
        yield http


async def _scrape(http: httpx.AsyncClient, **headers: str) -> dict[Any, float]:
    response = await http.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return samples(response.text)


async def _tool_turn(http: httpx.AsyncClient, model: ScriptedModel) -> dict[str, Any]:
    agent = {"agent_config": {"model": MODEL, "instructions": "Be brief.", "toolgroups": ["builtin::math"]}}
    agent_id = (await http.post("/v1/agents", json=agent)).json()["agent_id"]
    session_id = (await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})).json()["session_id"]
    model.enqueue_tool_call("calculator", {"expression": "6 * 7"})
    model.enqueue_text("It is 42.")
    body = {"messages": [user("what is 6 times 7?")], "stream": False}
    turn: dict[str, Any] = (await http.post(turn_url(agent_id, session_id), json=body)).json()
    assert turn["status"] == "completed", turn
    return turn


async def test_a_scrape_counts_turns_tools_tokens_routes_replays_and_refusals(
    tmp_path: Path, model: ScriptedModel
) -> None:
    quotas = quotas_for(QuotaSettings(requests_per_minute=1))
    async with _server(tmp_path, model, quotas=quotas) as http:
        before = await _scrape(http)
        turn = await _tool_turn(http, model)
        model.enqueue_text("Hello there.")
        response = await http.post("/v1/responses", json={"model": MODEL, "input": "hi"})
        assert response.json()["status"] == "completed", response.text
        assert (await http.get("/v1/agents/agent-that-is-not")).status_code == 404
        assert (await http.get("/v1/no/such/route")).status_code == 404
        agent = {"agent_config": {"model": MODEL, "instructions": "x"}}
        first = await http.post("/v1/agents", json=agent, headers={"Idempotency-Key": "k-1"})
        again = await http.post("/v1/agents", json=agent, headers={"Idempotency-Key": "k-1"})
        assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
        with acting_as(ALICE):  # quotas count authenticated callers: one request a minute
            assert (await http.get("/v1/models")).status_code == 200
            assert (await http.get("/v1/models")).status_code == 429
        after = await _scrape(http)

    moved = delta(before, after)
    chat = {"gen_ai_operation_name": "chat", "gen_ai_request_model": MODEL}
    http_count = "http_server_request_duration_seconds_count"
    expected = {
        key("ferryman_turns_total", api="agents", status="completed"): 1,
        key("ferryman_turn_duration_seconds_count", api="agents", status="completed"): 1,
        key("ferryman_turns_total", api="responses", status="completed"): 1,
        key("ferryman_tool_calls_total", tool="calculator", outcome="ok"): 1,
        key("ferryman_time_to_first_event_seconds_count", api="agents"): 1,
        key("gen_ai_client_token_usage_count", **chat, gen_ai_token_type="input"): 3,
        key("gen_ai_client_token_usage_sum", **chat, gen_ai_token_type="input"): 30,
        key("gen_ai_client_token_usage_count", **chat, gen_ai_token_type="output"): 3,
        key("gen_ai_client_token_usage_sum", **chat, gen_ai_token_type="output"): 5,  # "It is 42.", "Hello there."
        key("gen_ai_client_operation_duration_seconds_count", **chat, error_type=""): 3,
        key("ferryman_idempotent_replays_total"): 1,
        key("ferryman_quota_refusals_total", quota="requests"): 1,
        key(
            http_count, http_request_method="GET", http_route="/v1/agents/{agent_id}", http_response_status_code="404"
        ): 1,
        key(http_count, http_request_method="GET", http_route="unmatched", http_response_status_code="404"): 1,
        key(http_count, http_request_method="POST", http_route="/v1/agents", http_response_status_code="200"): 3,
        key(http_count, http_request_method="GET", http_route="/v1/models", http_response_status_code="200"): 1,
        key(http_count, http_request_method="GET", http_route="/v1/models", http_response_status_code="429"): 1,
        key(http_count, http_request_method="GET", http_route="/metrics", http_response_status_code="200"): 1,
    }
    assert {k: moved.get(k) for k in expected} == expected
    turn_route = "/v1/agents/{agent_id}/session/{session_id}/turn"
    assert moved[key(http_count, http_request_method="POST", http_route=turn_route, http_response_status_code="200")]
    assert (
        after[key("ferryman_running_turns", api="agents")] == after[key("ferryman_running_turns", api="responses")] == 0
    )
    # Ids, paths and a caller's text are never label values.
    labels = {value for _, pairs in after for _, value in pairs}
    assert not {turn["turn_id"], turn["session_id"], "/v1/no/such/route", "agent-that-is-not"} & labels


async def test_shield_verdicts_and_approvals_waiting_follow_a_paused_and_resumed_turn(
    tmp_path: Path, model: ScriptedModel
) -> None:
    shield = WordShield(unique("words"), "forbidden")
    services = build_services(SqliteStore(str(tmp_path / "ferryman.db")), [model], sole_process=True)
    services.shields.register(shield)
    async with serving(services) as http:
        before = await _scrape(http)
        config = {
            "model": MODEL,
            "instructions": "x",
            "toolgroups": ["builtin::math"],
            "input_shields": [shield.shield_id],
        }
        agent_id = (
            await http.post("/v1/agents", json={"agent_config": {**config, "require_approval": "always"}})
        ).json()["agent_id"]
        session_id = (await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})).json()[
            "session_id"
        ]
        model.enqueue_tool_call("calculator", {"expression": "6 * 7"})
        body = {"messages": [user("what is 6*7?")], "stream": False}
        paused = (await http.post(turn_url(agent_id, session_id), json=body)).json()
        assert paused["status"] == "awaiting_input"
        waiting = await _scrape(http)
        [call] = paused["output_message"]["tool_calls"]
        model.enqueue_text("It is 42.")
        resume = {"approvals": [{"call_id": call["call_id"], "approve": True}], "stream": False}
        url = f"{turn_url(agent_id, session_id, paused['turn_id'])}/resume"
        assert (await http.post(url, json=resume)).json()["status"] == "completed"
        blocked = {"messages": [user("say something forbidden")], "stream": False}
        assert (await http.post(turn_url(agent_id, session_id), json=blocked)).json()["status"] == "completed"
        after = await _scrape(http)

    approvals = key("ferryman_approvals_waiting")
    assert waiting[approvals] - before[approvals] == 1
    assert after[approvals] == before[approvals]
    moved = delta(before, after)
    assert moved[key("ferryman_shield_verdicts_total", shield=shield.shield_id, verdict="pass")] == 1
    assert moved[key("ferryman_shield_verdicts_total", shield=shield.shield_id, verdict="block")] == 1
    assert moved[key("ferryman_turns_total", api="agents", status="awaiting_input")] == 1
    assert moved[key("ferryman_turns_total", api="agents", status="completed")] == 2
    assert moved[key("ferryman_tool_calls_total", tool="calculator", outcome="ok")] == 1


async def test_without_authentication_metrics_are_open_and_with_it_only_a_granted_caller_reads_them(
    tmp_path: Path, model: ScriptedModel
) -> None:
    async with _server(tmp_path / "open", model) as http:
        assert (await http.get("/metrics")).status_code == 200
    policy = parse_policy(
        [*GRANT, {"permit": {"actions": ["create", "read", "update", "delete"]}, "when": "user is owner"}]
    )
    async with _server(tmp_path / "auth", model, authenticator=StaticTokens(), policy=policy) as http:
        assert (await http.get("/metrics")).status_code == 401
        refused = await http.get("/metrics", headers={"Authorization": "Bearer alice"})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
        scraped = await _scrape(http, Authorization="Bearer scraper")
        refusal = key(
            "http_server_request_duration_seconds_count",
            http_request_method="GET",
            http_route="/metrics",
            http_response_status_code="403",
        )
        assert scraped[refusal] >= 1


async def test_the_default_policy_lets_no_authenticated_caller_read_metrics(
    tmp_path: Path, model: ScriptedModel
) -> None:
    async with _server(tmp_path, model, authenticator=StaticTokens()) as http:
        for token in TOKENS:
            assert (await http.get("/metrics", headers={"Authorization": f"Bearer {token}"})).status_code == 403


async def test_metrics_off_serve_no_route_and_time_no_request(tmp_path: Path, model: ScriptedModel) -> None:
    async with _server(tmp_path / "on", model) as http:
        before = await _scrape(http)
    async with _server(tmp_path / "off", model, metrics="off") as http:
        assert (await http.get("/metrics")).status_code == 404
        assert (await http.get("/v1/models")).status_code == 200
    async with _server(tmp_path / "on-again", model) as http:
        after = await _scrape(http)
    moved = delta(before, after)
    assert not [
        k
        for k in moved
        if k[0] == "http_server_request_duration_seconds_count" and ("http_route", "/v1/models") in k[1]
    ]
