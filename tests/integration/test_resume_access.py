"""A resume reads the paused turn as well as its session: a policy that lets a caller into a session but not
into the turns another caller runs there keeps that caller from resuming them (a 404, as reading them is)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from test_multitask_access import A, B, StaticTokens

from ferryman.auth.policy import ACTIONS, parse_policy
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from inprocess import check_script, migrated_sqlite, serving

pytestmark = pytest.mark.anyio

ALICE, BOB = A, B
POLICY = parse_policy(
    [
        {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
        {"permit": {"actions": ["read", "update"], "resource": "agent::*"}},
        {"permit": {"actions": ["read", "update"], "resource": "session::*"}},
    ]
)
"""Bob may use Alice's agent and her session, but not read (or touch) the turns she runs there."""
WEATHER = {"name": "get_weather", "description": "weather", "parameters": []}


@pytest.fixture
async def app(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, ScriptedModel]]:
    model = ScriptedModel(model_ids=("scripted-model",))
    store = SqliteStore(migrated_sqlite(tmp_path / "shared.db"))
    services = build_services(store, [model], sole_process=True, authenticator=StaticTokens(), policy=POLICY)
    async with serving(services) as http:
        yield http, model
    check_script(request, model.script)


async def _paused(http: httpx.AsyncClient, model: ScriptedModel) -> str:
    """Alice's turn paused on a client tool in her session: its URL."""
    config = {"model": "scripted-model", "instructions": "Be brief.", "client_tools": [WEATHER]}
    agent_id = (await http.post("/v1/agents", json={"agent_config": config}, headers=ALICE)).json()["agent_id"]
    session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}, headers=ALICE)
    url = f"/v1/agents/{agent_id}/session/{session.json()['session_id']}/turn"
    model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id="c1")]))
    body = {"messages": [{"role": "user", "content": "Weather?"}], "stream": False}
    paused = await http.post(url, json=body, headers=ALICE)
    assert paused.json()["status"] == "awaiting_input", paused.text
    turn_url = f"{url}/{paused.json()['turn_id']}"
    assert (await http.get(turn_url, headers=BOB)).status_code == 404  # not Bob's to read
    return turn_url


async def test_a_caller_who_may_not_read_a_paused_turn_cannot_resume_it(
    app: tuple[httpx.AsyncClient, ScriptedModel],
) -> None:
    http, model = app
    turn_url = await _paused(http, model)

    answer = {"tool_responses": [{"call_id": "c1", "tool_name": "get_weather", "content": "rain"}], "stream": False}
    resumed = await http.post(f"{turn_url}/resume", json=answer, headers=BOB)

    assert resumed.status_code == 404, resumed.text
    assert (await http.get(turn_url, headers=ALICE)).json()["status"] == "awaiting_input"


async def test_a_caller_who_may_not_read_a_paused_turn_cannot_fork_at_it(
    app: tuple[httpx.AsyncClient, ScriptedModel],
) -> None:
    """A fork at a paused turn copies it with its pending step: the caller must be able to read the turn."""
    http, model = app
    turn_url = await _paused(http, model)
    session_url, turn_id = turn_url.rsplit("/turn/", 1)

    forked = await http.post(f"{session_url}/fork", json={"turn_id": turn_id}, headers=BOB)

    assert forked.status_code == 404, forked.text
    own = await http.post(f"{session_url}/fork", json={"turn_id": turn_id}, headers=ALICE)
    assert own.status_code == 200, own.text
