"""A redacting input shield leaves no trace of what it redacted: every stored form holds the redacted input.

The turn's input is stored before its shields run; after a ``ferryman-local`` shield
redacts an AWS key, the key must be gone from the stored turn, the history the next
turn's model reads, the stored (replayed) events, and on the Responses API from the
response's input items, the listed response and its conversation's items.
Run on SQLite and on Redis (each with its own scripts for the rewrite).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from storage_backends import unopened_store

from ferryman.server.app import Services, build_services
from ferryman.testing import ScriptedModel
from inprocess import serving

pytestmark = pytest.mark.anyio

SECRET = "AKIAABCDEFGHIJKLMNOP"
MARKER = "[REDACTED:aws_access_key]"


@pytest.fixture(params=["sqlite", "redis"])
async def app(
    request: pytest.FixtureRequest, tmp_path: Path, scripted: ScriptedModel
) -> AsyncIterator[tuple[httpx.AsyncClient, Services]]:
    async with unopened_store(request.param, tmp_path) as store:
        services = build_services(store, [scripted])
        async with serving(services) as http:
            yield http, services


async def _settled(services: Services) -> None:
    """Once no run is live: each ended and stored its events (woken by the runs, no polling)."""
    runner = services.runner
    async with asyncio.timeout(30):
        while live := [run for turn_id in runner.running() if (run := runner.run(turn_id))]:
            await asyncio.gather(*(run.settled.wait() for run in live))


async def _redacting_shield(http: httpx.AsyncClient) -> str:
    shield_id = f"redact-{uuid.uuid4().hex[:8]}"
    body = {"shield_id": shield_id, "provider_id": "ferryman-local", "params": {"action": "redact"}}
    answer = await http.post("/v1/shields", json=body)
    assert answer.status_code == 200, answer.text
    return shield_id


def _clean(value: Any) -> None:
    text = value if isinstance(value, str) else json.dumps(value)
    assert SECRET not in text
    assert MARKER in text


async def test_agent_turn_stores_only_the_redacted_input(
    app: tuple[httpx.AsyncClient, Services], scripted: ScriptedModel
) -> None:
    http, services = app
    shield_id = await _redacting_shield(http)
    config = {"model": "scripted-model", "instructions": "be brief", "input_shields": [shield_id]}
    agent_id = (await http.post("/v1/agents", json={"agent_config": config})).json()["agent_id"]
    session_url = f"/v1/agents/{agent_id}/session"
    session_id = (await http.post(session_url, json={"session_name": "s"})).json()["session_id"]
    turns = f"{session_url}/{session_id}/turn"
    scripted.enqueue_text("noted")
    message = {"role": "user", "content": f"my key is {SECRET}"}
    created = await http.post(turns, json={"messages": [message], "stream": False})
    assert created.status_code == 200, created.text
    turn = created.json()
    _clean(turn["input_messages"])
    await _settled(services)

    _clean((await http.get(f"{turns}/{turn['turn_id']}")).json()["input_messages"])
    replayed = (await http.get(f"{turns}/{turn['turn_id']}/events")).text
    assert SECRET not in replayed and MARKER in replayed
    scripted.enqueue_text("again")
    follow = {"messages": [{"role": "user", "content": "and now?"}], "stream": False}
    assert (await http.post(turns, json=follow)).status_code == 200
    first_request, next_request = scripted.requests
    _clean(first_request["messages"])
    _clean(next_request["messages"])
    _clean((await http.get(f"{session_url}/{session_id}")).json())


async def test_response_stores_only_the_redacted_input(
    app: tuple[httpx.AsyncClient, Services], scripted: ScriptedModel
) -> None:
    http, services = app
    shield_id = await _redacting_shield(http)
    conversation_id = (await http.post("/v1/conversations", json={})).json()["id"]
    scripted.enqueue_text("noted")
    body = {
        "model": "scripted-model",
        "input": f"my key is {SECRET}",
        "guardrails": [shield_id],
        "conversation": conversation_id,
    }
    created = await http.post("/v1/responses", json=body)
    assert created.status_code == 200, created.text
    response_id = created.json()["id"]
    await _settled(services)

    _clean((await http.get(f"/v1/responses/{response_id}/input_items")).json()["data"])
    _clean((await http.get("/v1/responses")).json()["data"])
    _clean((await http.get(f"/v1/conversations/{conversation_id}/items")).json()["data"])
    replayed = (await http.get(f"/v1/responses/{response_id}", params={"stream": "true"})).text
    assert SECRET not in replayed
    scripted.enqueue_text("again")
    scripted.enqueue_text("chained")
    follow = {"model": "scripted-model", "input": "and now?", "conversation": conversation_id}
    assert (await http.post("/v1/responses", json=follow)).status_code == 200
    chained = {"model": "scripted-model", "input": "and then?", "previous_response_id": response_id}
    assert (await http.post("/v1/responses", json=chained)).status_code == 200
    for request in scripted.requests:
        _clean(request["messages"])
