"""What an input shield blocked is never sent to a model or a guard again, on both APIs, with both shield kinds.

Turn 1 (or response 1) sends an e-mail address an input shield blocks: the local shield
(``ferryman-local``, ``action: block``) or Llama Guard (played by the scripted model, which
records every call, the guard's included). The session goes on: turn 2 is clean. No call
after the block may carry the address: not the model's in turn 2 (through the session's
history, ``previous_response_id`` or a conversation), nor the guard's. The stored turn and
the response's items hold the placeholder; the refusal follows it in the history.
Run on SQLite and on Redis (each with its own scripts for the rewrite).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from storage_backends import unopened_store

from ferryman.safety_settings import SafetySettings
from ferryman.server.app import Services, build_services
from ferryman.testing import ScriptedModel
from ferryman.withheld import KEPT_KEY, WITHHELD_TEXT
from inprocess import serving

pytestmark = pytest.mark.anyio

BLOCKED = "mail alice@example.com"
SECRET = "alice@example.com"
CLEAN = "second clean message"
GUARD_REFUSAL = "I can't answer that. Can I help with something else?"


@asynccontextmanager
async def _app(
    backend: str, tmp_path: Path, scripted: ScriptedModel, keep: bool = False
) -> AsyncIterator[tuple[httpx.AsyncClient, Services]]:
    async with unopened_store(backend, tmp_path) as store:
        services = build_services(store, [scripted], safety_settings=SafetySettings(keep_blocked_text=keep))
        async with serving(services) as http:
            yield http, services


@pytest.fixture(params=["sqlite", "redis"])
async def app(
    request: pytest.FixtureRequest, tmp_path: Path, scripted: ScriptedModel
) -> AsyncIterator[tuple[httpx.AsyncClient, Services]]:
    async with _app(request.param, tmp_path, scripted) as served:
        yield served


async def _settled(services: Services) -> None:
    """Once no run is live: each ended and stored its events (woken by the runs, no polling)."""
    runner = services.runner
    async with asyncio.timeout(30):
        while live := [run for turn_id in runner.running() if (run := runner.run(turn_id))]:
            await asyncio.gather(*(run.settled.wait() for run in live))


class Guard:
    """One shield kind, registered over HTTP: what it blocks with, and the replies its checks take."""

    def __init__(self, kind: str, scripted: ScriptedModel) -> None:
        self.kind = kind
        self._scripted = scripted

    async def register(self, http: httpx.AsyncClient) -> str:
        shield_id = f"{self.kind}-{uuid.uuid4().hex[:8]}"
        if self.kind == "local":
            body: dict[str, Any] = {"provider_id": "ferryman-local", "params": {"action": "block"}}
        else:
            body = {"provider_id": "llama-guard", "provider_shield_id": "scripted-model"}
        answer = await http.post("/v1/shields", json={"shield_id": shield_id, **body})
        assert answer.status_code == 200, answer.text
        return shield_id

    def verdict(self, safe: bool) -> None:
        """Script the guard's next verdict (the local shield needs none)."""
        if self.kind == "guard":
            self._scripted.enqueue_text("safe" if safe else "unsafe\nS7")

    @property
    def refusal(self) -> str:
        return GUARD_REFUSAL if self.kind == "guard" else "The message was blocked: it contains email."


@pytest.fixture(params=["local", "guard"])
def guard(request: pytest.FixtureRequest, scripted: ScriptedModel) -> Guard:
    return Guard(request.param, scripted)


def _text(content: Any) -> str:
    """A message's text as the model got it: a string, or its parts' texts joined."""
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def _calls_after_the_block(scripted: ScriptedModel, guard: Guard) -> list[dict[str, Any]]:
    """Every model call after the one that judged the blocked input (Llama Guard's, which had to read it)."""
    return scripted.requests[1:] if guard.kind == "guard" else list(scripted.requests)


def _roles_and_texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], _text(m["content"])) for m in messages]


async def _agent_session(http: httpx.AsyncClient, shield_id: str) -> str:
    config = {"model": "scripted-model", "instructions": "be brief", "input_shields": [shield_id]}
    agent_id = (await http.post("/v1/agents", json={"agent_config": config})).json()["agent_id"]
    session_url = f"/v1/agents/{agent_id}/session"
    session_id = (await http.post(session_url, json={"session_name": "s"})).json()["session_id"]
    return f"{session_url}/{session_id}"


async def test_agent_session_goes_on_without_the_blocked_input(
    app: tuple[httpx.AsyncClient, Services], scripted: ScriptedModel, guard: Guard
) -> None:
    http, services = app
    session = await _agent_session(http, await guard.register(http))
    guard.verdict(safe=False)
    first = await http.post(f"{session}/turn", json={"messages": [{"role": "user", "content": BLOCKED}]})
    assert first.status_code == 200, first.text
    blocked = first.json()
    assert blocked["output_message"]["content"] == guard.refusal
    assert blocked["input_messages"] == [{"role": "user", "content": WITHHELD_TEXT, "context": None}]
    assert blocked["steps"][-1]["violation"]["violation_level"] == "error"
    guard.verdict(safe=True)
    scripted.enqueue_text("fine")
    second = await http.post(f"{session}/turn", json={"messages": [{"role": "user", "content": CLEAN}]})
    assert second.json()["output_message"]["content"] == "fine"
    await _settled(services)

    for call in _calls_after_the_block(scripted, guard):
        assert SECRET not in json.dumps(call["messages"])
    assert _roles_and_texts(scripted.requests[-1]["messages"]) == [
        ("system", "be brief"),
        ("user", WITHHELD_TEXT),
        ("assistant", guard.refusal),
        ("user", CLEAN),
    ]
    stored = (await http.get(f"{session}/turn/{blocked['turn_id']}")).json()
    assert SECRET not in json.dumps(stored) and WITHHELD_TEXT in json.dumps(stored["input_messages"])
    assert SECRET not in (await http.get(f"{session}/turn/{blocked['turn_id']}/events")).text
    assert SECRET not in json.dumps((await http.get(session)).json())


async def _respond(http: httpx.AsyncClient, text: str, shield_id: str, **context: str) -> dict[str, Any]:
    body = {"model": "scripted-model", "input": text, "guardrails": [shield_id], **context}
    created = await http.post("/v1/responses", json=body)
    assert created.status_code == 200, created.text
    return cast(dict[str, Any], created.json())


def _refusal_of(response: dict[str, Any]) -> str:
    [item] = response["output"]
    [part] = item["content"]
    assert part["type"] == "refusal"
    return str(part["refusal"])


@pytest.mark.parametrize("link", ["previous_response_id", "previous_response_id_stored", "conversation"])
async def test_response_chain_goes_on_without_the_blocked_input(
    app: tuple[httpx.AsyncClient, Services], scripted: ScriptedModel, guard: Guard, link: str
) -> None:
    http, services = app
    shield_id = await guard.register(http)
    context: dict[str, str] = {}
    if link == "conversation":
        context["conversation"] = (await http.post("/v1/conversations", json={})).json()["id"]
    guard.verdict(safe=False)
    refused = await _respond(http, BLOCKED, shield_id, **context)
    assert _refusal_of(refused) == guard.refusal
    if link.startswith("previous_response_id"):
        context["previous_response_id"] = refused["id"]
    if link == "previous_response_id_stored":
        await _settled(services)
        services.responses.forget(None)  # the chain is read back from the store, as after a restart
    guard.verdict(safe=True)  # the input
    scripted.enqueue_text("fine")
    guard.verdict(safe=True)  # the answer
    answered = await _respond(http, CLEAN, shield_id, **context)
    assert answered["output"][0]["content"][0]["text"] == "fine"
    await _settled(services)

    for call in _calls_after_the_block(scripted, guard):
        assert SECRET not in json.dumps(call["messages"])
    [model_call] = [r for r in scripted.requests if _text(r["messages"][-1]["content"]) == CLEAN]
    assert _roles_and_texts(model_call["messages"]) == [
        ("user", WITHHELD_TEXT),
        ("assistant", guard.refusal),
        ("user", CLEAN),
    ]
    items = (await http.get(f"/v1/responses/{refused['id']}/input_items")).json()["data"]
    assert [item["content"] for item in items] == [[{"type": "input_text", "text": WITHHELD_TEXT}]]
    assert SECRET not in json.dumps((await http.get("/v1/responses")).json())
    if "conversation" in context:
        listed = (await http.get(f"/v1/conversations/{context['conversation']}/items")).json()["data"]
        assert SECRET not in json.dumps(listed) and WITHHELD_TEXT in json.dumps(listed)


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
async def test_kept_blocked_text_is_for_review_only(tmp_path: Path, scripted: ScriptedModel, backend: str) -> None:
    async with _app(backend, tmp_path, scripted, keep=True) as (http, services):
        guard = Guard("local", scripted)
        session = await _agent_session(http, await guard.register(http))
        blocked = (await http.post(f"{session}/turn", json={"messages": [{"role": "user", "content": BLOCKED}]})).json()
        scripted.enqueue_text("fine")
        await http.post(f"{session}/turn", json={"messages": [{"role": "user", "content": CLEAN}]})
        await _settled(services)
        [request] = scripted.requests
        assert SECRET not in json.dumps(request["messages"])
        stored = (await http.get(f"{session}/turn/{blocked['turn_id']}")).json()
        [verdict] = [step["violation"] for step in stored["steps"] if step["step_type"] == "shield_call"]
        assert verdict["metadata"][KEPT_KEY] == [{"role": "user", "content": BLOCKED, "context": None}]
        assert stored["input_messages"] == [{"role": "user", "content": WITHHELD_TEXT, "context": None}]
