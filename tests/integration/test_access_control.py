"""Two principals against every route of every API: no one touches another's records.

The cases are keyed by the route table (``API_MOUNTS``): a route without a case
fails :func:`test_every_route_has_a_case`, so a new route cannot go unchecked.
Principal A creates one of everything; B then calls every route with A's ids
and gets a 404 (or a list without A's records); A still can do everything.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from tests.inprocess import scripted_provider, serving
from tests.webhook_receiver import Receiver, receiving

from ferryman.auth.principal import Principal, PrincipalKind
from ferryman.errors import AuthenticationError
from ferryman.inference.local_embeddings import LocalEmbeddingProvider
from ferryman.safe_fetch import FetchPolicy
from ferryman.schedule_settings import ScheduleSettings
from ferryman.server.app import API_MOUNTS, build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply
from ferryman.testing.scripted import ScriptedToolCall
from ferryman.webhook_settings import WebhookSettings
from ferryman.webhooks.signing import new_secret

TOKENS = {
    "token-a": Principal(PrincipalKind.SUBJECT, "alice", {"teams": ("red",)}),
    "token-b": Principal(PrincipalKind.SUBJECT, "bob", {"teams": ("blue",)}),
}
A, B = {"Authorization": "Bearer token-a"}, {"Authorization": "Bearer token-b"}
WEATHER = {
    "name": "get_weather",
    "description": "Weather",
    "parameters": [{"name": "city", "parameter_type": "string", "description": "City", "required": True}],
}


class StaticTokens:
    """A test authenticator: fixed tokens, fixed principals."""

    async def authenticate(self, credential: str) -> Principal:
        try:
            return TOKENS[credential]
        except KeyError:
            raise AuthenticationError() from None


@dataclass(frozen=True)
class Call:
    """One request B makes with A's ids, and what it must get."""

    body: dict[str, Any] | None = None
    query: dict[str, Any] = field(default_factory=dict)
    form: dict[str, Any] | None = None
    """A multipart form (an upload: ``{"purpose": ..., "file": (name, bytes, type)}``) instead of a JSON body."""
    headers: dict[str, str] = field(default_factory=dict)
    expect: str = "missing"
    """``missing``: 404; ``list``: 200 naming none of A's ids; ``own``: B's own create, 200; ``open``: 200;
    ``taken``: 409 (a name A holds is not B's to replace); ``stateless``: touches no record, not called;
    ``absent``: a 400 or 404, the same answer as the same call with A's ids it names (``alice-model``, an
    agent) replaced by ones nobody has."""


@dataclass
class Owned:
    """A's records: path parameter -> id."""

    ids: dict[str, str]

    def fill(self, path: str) -> str:
        path = path.replace("{model_id:path}", self.ids["model_id"])
        path = path.replace("{shield_id:path}", self.ids["shield_id"])
        return path.replace("{toolgroup_id:path}", self.ids["toolgroup_id"]).format(**self.ids)


_SESSION = "/agents/{agent_id}/session/{session_id}"
_TURN = f"{_SESSION}/turn/{{turn_id}}"
_CONV = "/conversations/{conversation_id}"
_BLOCK = "/agents/{agent_id}/memory/{label}"
_VS_OPENAI = "/vector_stores/{vector_store_id}"
_SCHEDULE = "/schedules/{schedule_id}"
MESSAGE = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
YEARLY = {"cron": "0 0 1 1 *", "message": "hi"}
CASES: dict[tuple[str, str], list[Call]] = {
    ("POST", "/agents"): [
        Call({"agent_config": {"model": "scripted-model", "instructions": "b"}}, expect="own"),
        # A's registration is not B's to use: it answers as a model that does not exist.
        Call({"agent_config": {"model": "alice-model", "instructions": "b"}}, expect="absent"),
    ],
    ("GET", "/agents"): [Call(expect="list")],
    ("GET", "/agents/{agent_id}"): [Call()],
    ("DELETE", "/agents/{agent_id}"): [Call()],
    ("POST", "/agents/{agent_id}/session"): [Call({"session_name": "b"})],
    ("GET", "/agents/{agent_id}/sessions"): [Call()],
    ("GET", _SESSION): [Call()],
    ("DELETE", _SESSION): [Call()],
    ("POST", f"{_SESSION}/fork"): [Call({"turn_id": "{turn_id}"})],
    ("POST", f"{_SESSION}/turn"): [Call(MESSAGE), Call({**MESSAGE, "stream": False})],
    ("GET", _TURN): [Call()],
    ("POST", f"{_TURN}/resume"): [
        Call({"tool_responses": [{"call_id": "c1", "tool_name": "get_weather", "content": "x"}], "stream": True})
    ],
    ("GET", f"{_TURN}/step/{{step_id}}"): [Call()],
    ("GET", f"{_TURN}/events"): [Call(), Call(headers={"Last-Event-ID": "0"})],
    ("GET", "/agents/{agent_id}/memory"): [Call()],
    ("GET", _BLOCK): [Call()],
    ("PUT", _BLOCK): [Call({"value": "b"}), Call({"value": "b", "version": 1})],
    ("DELETE", _BLOCK): [Call()],
    ("GET", f"{_BLOCK}/versions"): [Call()],
    ("GET", "/health"): [Call(expect="open")],
    ("GET", "/models"): [Call(expect="list")],
    ("POST", "/models"): [
        Call({"model_id": "alice-model", "provider_id": "remote", "provider_model_id": "other"}, expect="taken"),
        # A model every caller is served (configured or listed by its provider) is not one caller's to redirect.
        Call({"model_id": "scripted-model", "provider_id": "remote", "provider_model_id": "other"}, expect="taken"),
    ],
    ("GET", "/models/{model_id:path}"): [Call()],
    ("DELETE", "/models/{model_id:path}"): [Call()],
    ("GET", "/toolgroups"): [Call(expect="list")],
    ("POST", "/toolgroups"): [
        Call({"toolgroup_id": "bob-tools", "provider_id": "builtin::math"}, expect="own"),
        Call({"toolgroup_id": "{toolgroup_id}", "provider_id": "builtin::math"}, expect="taken"),
    ],
    ("GET", "/toolgroups/{toolgroup_id:path}"): [Call()],
    ("DELETE", "/toolgroups/{toolgroup_id:path}"): [Call()],
    ("GET", "/tools"): [Call(expect="open"), Call(query={"toolgroup_id": "alice-tools"})],
    ("GET", "/shields"): [Call(expect="list")],
    ("POST", "/shields"): [
        Call({"shield_id": "bob-shield", "provider_id": "ferryman-local"}, expect="own"),
        Call({"shield_id": "{shield_id}", "provider_id": "ferryman-local"}, expect="taken"),
    ],
    ("GET", "/shields/{shield_id:path}"): [Call()],
    ("DELETE", "/shields/{shield_id:path}"): [Call()],
    ("POST", "/safety/run-shield"): [
        Call({"shield_id": "{shield_id}", "messages": [{"role": "user", "content": "x"}]})
    ],
    # A's registered model is not B's guard model either.
    ("POST", "/moderations"): [Call({"input": "x", "model": "alice-model"}, expect="absent")],
    ("GET", "/tools/{tool_name}"): [Call(expect="stateless")],
    ("GET", "/tool-runtime/list-tools"): [Call(query={"tool_group_id": "alice-tools"})],
    ("POST", "/tool-runtime/invoke"): [Call(expect="stateless")],
    ("POST", "/chat/completions"): [
        Call({"model": "alice-model", "messages": [{"role": "user", "content": "x"}]}, expect="absent")
    ],
    ("POST", "/embeddings"): [Call({"model": "alice-model", "input": "x"}, expect="absent")],
    ("POST", "/responses"): [
        Call({"model": "alice-model", "input": "x"}, expect="absent"),
        Call({"model": "scripted-model", "input": "x", "previous_response_id": "{response_id}"}),
        Call({"model": "scripted-model", "input": "x", "conversation": "{conversation_id}", "stream": True}),
    ],
    ("GET", "/responses"): [Call(expect="list"), Call(query={"conversation_id": "{conversation_id}"})],
    ("GET", "/responses/{response_id}"): [
        Call(),
        Call(query={"stream": "true"}),
        Call(query={"stream": "true"}, headers={"Last-Event-ID": "0"}),
    ],
    ("DELETE", "/responses/{response_id}"): [Call()],
    ("POST", "/responses/{response_id}/cancel"): [Call()],
    ("POST", "/responses/compact"): [
        Call({"model": "scripted-model", "input": "x"}, expect="own"),
        Call({"model": "scripted-model", "input": "x", "previous_response_id": "{response_id}"}),
        Call({"model": "alice-model", "input": "x"}, expect="absent"),
    ],
    ("GET", "/responses/{response_id}/input_items"): [Call()],
    ("POST", "/conversations"): [Call({}, expect="own")],
    ("GET", "/conversations"): [Call(expect="list")],
    ("GET", _CONV): [Call()],
    ("POST", _CONV): [Call({"metadata": {"k": "v"}})],
    ("DELETE", _CONV): [Call()],
    ("POST", f"{_CONV}/fork"): [Call({"item_id": "{item_id}"})],
    ("POST", f"{_CONV}/items"): [Call({"items": [{"type": "message", "role": "user", "content": "x"}]})],
    ("GET", f"{_CONV}/items"): [Call()],
    ("GET", f"{_CONV}/items/{{item_id}}"): [Call()],
    ("DELETE", f"{_CONV}/items/{{item_id}}"): [Call()],
    ("POST", "/files"): [Call(form={"purpose": "assistants", "file": ("b.txt", b"bob", "text/plain")}, expect="own")],
    ("GET", "/files"): [Call(expect="list"), Call(query={"purpose": "assistants"}, expect="list")],
    ("GET", "/files/{file_id}"): [Call()],
    ("GET", "/files/{file_id}/content"): [Call()],
    ("DELETE", "/files/{file_id}"): [Call()],
    ("POST", "/vector_stores"): [Call({"name": "b"}, expect="own"), Call({"file_ids": ["{file_id}"]})],
    ("GET", "/vector_stores"): [Call(expect="list")],
    ("GET", _VS_OPENAI): [Call()],
    ("POST", _VS_OPENAI): [Call({"name": "b"})],
    ("DELETE", _VS_OPENAI): [Call()],
    ("POST", f"{_VS_OPENAI}/search"): [Call({"query": "river"})],
    ("POST", f"{_VS_OPENAI}/files"): [Call({"file_id": "{file_id}"})],
    ("GET", f"{_VS_OPENAI}/files"): [Call()],
    ("GET", f"{_VS_OPENAI}/files/{{file_id}}"): [Call()],
    ("POST", f"{_VS_OPENAI}/files/{{file_id}}"): [Call({"attributes": {"k": "v"}})],
    ("DELETE", f"{_VS_OPENAI}/files/{{file_id}}"): [Call()],
    ("GET", f"{_VS_OPENAI}/files/{{file_id}}/content"): [Call()],
    ("POST", f"{_VS_OPENAI}/file_batches"): [Call({"file_ids": ["{file_id}"]})],
    ("GET", f"{_VS_OPENAI}/file_batches/{{batch_id}}"): [Call()],
    ("POST", f"{_VS_OPENAI}/file_batches/{{batch_id}}/cancel"): [Call()],
    ("GET", f"{_VS_OPENAI}/file_batches/{{batch_id}}/files"): [Call()],
    ("POST", "/vector-dbs"): [
        Call({"vector_db_id": "bobs-db", "embedding_model": "all-MiniLM-L6-v2"}, expect="own"),
        Call({"vector_db_id": "{vector_db_id}", "embedding_model": "all-MiniLM-L6-v2"}, expect="taken"),
    ],
    ("GET", "/vector-dbs"): [Call(expect="list")],
    ("GET", "/vector-dbs/{vector_db_id}"): [Call()],
    ("DELETE", "/vector-dbs/{vector_db_id}"): [Call()],
    ("POST", "/vector-io/insert"): [
        Call({"vector_db_id": "{vector_db_id}", "chunks": [{"content": "x", "metadata": {"document_id": "d"}}]})
    ],
    ("POST", "/vector-io/query"): [Call({"vector_db_id": "{vector_db_id}", "query": "river"})],
    ("POST", "/tool-runtime/rag-tool/insert"): [
        Call({"vector_db_id": "{vector_db_id}", "documents": [{"document_id": "d", "content": "x"}]})
    ],
    ("POST", "/tool-runtime/rag-tool/query"): [Call({"content": "river", "vector_db_ids": ["{vector_db_id}"]})],
    # B's usage names none of A's agents (each row's key is an agent id).
    ("GET", "/usage"): [Call(expect="list")],
    # B's audit trail: its own records only (tests/integration/test_audit.py checks whose records each reads).
    ("GET", "/audit"): [Call(expect="list"), Call(query={"principal": "sub:alice"}, expect="list")],
    ("POST", "/schedules"): [
        Call({**YEARLY, "agent_id": "{bob_agent_id}"}, expect="own"),
        # A's agent is named as one nobody has: a 400 naming ``agent_id``, as for any agent B cannot see.
        Call({**YEARLY, "agent_id": "{agent_id}"}, expect="absent"),
    ],
    ("GET", "/schedules"): [Call(expect="list"), Call(query={"agent_id": "{agent_id}"}, expect="list")],
    ("GET", _SCHEDULE): [Call()],
    ("POST", _SCHEDULE): [Call({"paused": True}), Call({"paused": False})],
    ("DELETE", _SCHEDULE): [Call()],
    ("GET", f"{_SCHEDULE}/runs"): [Call()],
    ("GET", "/approvals"): [
        Call(expect="list"),
        Call(query={"agent_id": "{agent_id}"}, expect="list"),
        Call(query={"source": "turn"}, expect="list"),
    ],
    ("POST", "/approvals/{approval_id}/approve"): [Call({})],
    ("POST", "/approvals/{approval_id}/deny"): [Call({"reason": "b"})],
    ("GET", "/webhook_deliveries"): [Call(expect="list"), Call(query={"run_id": "{hooked_turn_id}"}, expect="list")],
    ("GET", "/webhook_deliveries/{delivery_id}"): [Call()],
}
"""Every route of every API (keyed by method and path under its mount), with B's calls on A's records."""

ROUTES = [(prefix, entry.method, entry.path) for prefix, table in API_MOUNTS for entry in table]


def test_every_route_has_a_case() -> None:
    missing = sorted({(m, p) for _, m, p in ROUTES} - set(CASES))
    assert not missing, f"routes without an access-control case: {missing}"
    assert set(CASES) <= {(m, p) for _, m, p in ROUTES}, "cases for routes that no longer exist"


@dataclass
class Served:
    """The app's client, the script its model answers from, and a webhook receiver on loopback."""

    http: httpx.AsyncClient
    script: Script
    receiver: Receiver


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    script = Script(default_reply=ScriptedReply(text="ok"))
    services = build_services(
        SqliteStore(str(tmp_path / "acl.db")),
        [scripted_provider(script), LocalEmbeddingProvider()],
        sole_process=True,
        authenticator=StaticTokens(),
        fetch=FetchPolicy(allowed_hosts=["127.0.0.1"]),  # the receiver's host, for A's webhook
        webhooks=WebhookSettings(secret=SecretStr(new_secret())),
        schedules=ScheduleSettings(fire=False),  # A's schedule is read and changed here, never fired
    )
    with receiving() as receiver:
        async with serving(services) as http:
            yield Served(http, script, receiver)


async def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return response.json() if response.content else {}  # type: ignore[no-any-return]


async def _alice_makes_one_of_everything(served: Served) -> Owned:
    http = served.http
    # A client tool pauses one turn for input; every calculator call waits for approval.
    config = {"client_tools": [WEATHER], "toolgroups": ["builtin::math"], "require_approval": "always"}
    agent = {"agent_config": {"model": "scripted-model", "instructions": "a", **config}}
    agent_id = (await _ok(await http.post("/v1/agents", json=agent, headers=A)))["agent_id"]

    async def session(name: str) -> str:
        made = await _ok(await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": name}, headers=A))
        return str(made["session_id"])

    async def turn(session_id: str, call: ScriptedToolCall | None = None, **extra: Any) -> dict[str, Any]:
        if call is not None:
            served.script.enqueue(ScriptedReply(tool_calls=[call]))
        url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
        return await _ok(await http.post(url, json={**MESSAGE, "stream": False, **extra}, headers=A))

    session_id = await session("a")
    paused = await turn(session_id, ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}))
    assert paused["status"] == "awaiting_input"
    second = await session("b")
    finished = await turn(second, webhook=served.receiver.url)
    assert finished["status"] == "completed"
    (posted,) = await asyncio.to_thread(served.receiver.wait_for, 1)
    held_session = await session("c")
    held = await turn(held_session, ScriptedToolCall(name="calculator", arguments={"expression": "6 * 7"}))
    assert held["status"] == "awaiting_input" and held["approval_requests"]
    approvals = await _ok(await http.get("/v1/approvals", headers=A))
    [approval] = [a for a in approvals["data"] if a["turn_id"] == held["turn_id"]]
    schedule = await _ok(await http.post("/v1/schedules", json={**YEARLY, "agent_id": agent_id}, headers=A))
    await _ok(await http.put(f"/v1/agents/{agent_id}/memory/notes", json={"value": "alice's"}, headers=A))
    response = await _ok(await http.post("/v1/responses", json={"model": "scripted-model", "input": "hi"}, headers=A))
    conversation = await _ok(
        await http.post(
            "/v1/conversations", json={"items": [{"type": "message", "role": "user", "content": "hi"}]}, headers=A
        )
    )
    items = await _ok(await http.get(f"/v1/conversations/{conversation['id']}/items", headers=A))
    await _ok(
        await http.post(
            "/v1/models",
            json={"model_id": "alice-model", "provider_id": "remote", "provider_model_id": "scripted-model"},
            headers=A,
        )
    )
    group = {"toolgroup_id": "alice-tools", "provider_id": "builtin::math"}
    await _ok(await http.post("/v1/toolgroups", json=group, headers=A))
    await _ok(
        await http.post("/v1/shields", json={"shield_id": "alice-shield", "provider_id": "ferryman-local"}, headers=A)
    )
    return Owned(
        {
            "agent_id": agent_id,
            "session_id": session_id,
            "turn_id": paused["turn_id"],
            "step_id": finished["steps"][0]["step_id"],
            "finished_session": second,
            "response_id": response["id"],
            "conversation_id": conversation["id"],
            "item_id": items["data"][0]["id"],
            "model_id": "alice-model",
            "toolgroup_id": "alice-tools",
            "shield_id": "alice-shield",
            "tool_name": "calculator",
            "label": "notes",
            "hooked_turn_id": finished["turn_id"],
            "delivery_id": posted.headers["webhook-id"],
            "held_session": held_session,
            "held_turn_id": held["turn_id"],
            "approval_id": approval["id"],
            "schedule_id": schedule["id"],
            **await _alice_makes_knowledge(http),
        }
    )


def _fill(value: Any, owned: Owned) -> Any:
    if isinstance(value, str):
        return value.format(**owned.ids)
    if isinstance(value, dict):
        return {k: _fill(v, owned) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, owned) for v in value]
    return value


@pytest.mark.anyio
async def test_no_principal_touches_another_principals_records_through_any_route(served: Served) -> None:
    http = served.http
    owned = await _alice_makes_one_of_everything(served)
    # B's own records that its own creates name (not A's: listings may show them).
    bobs = {"bob_agent_id": await _bob_makes_an_agent(http)}
    named = Owned({**owned.ids, **bobs})
    # The step lives in A's finished session: its route is called with that session.
    step_ids = {**owned.ids, "session_id": owned.ids["finished_session"]}
    checked = 0
    for prefix, method, path in ROUTES:
        for call in CASES[(method, path)]:
            if call.expect == "stateless":
                continue
            ids = Owned(step_ids) if "step_id" in path else owned
            url = prefix + ids.fill(path)
            body = _fill(call.body, named) if call.body is not None else None
            answer = await _call(http, method, url, body, replace(call, query=_fill(call.query, owned)))
            where = f"B {method} {url} {call}"
            if call.expect == "absent":
                nobodys = _nobodys_ids(body, owned)
                nobody = json.loads(_replaced(json.dumps(body), nobodys))
                unknown = await http.request(method, url, json=nobody, headers=B, timeout=10)
                seen = _replaced(answer.text, nobodys)
                assert (answer.status_code, seen) == (unknown.status_code, unknown.text), where
                assert answer.status_code in (400, 404), where
            elif call.expect == "missing":
                assert answer.status_code == 404, f"{where}: {answer.status_code} {answer.text[:200]}"
            elif call.expect == "taken":
                assert answer.status_code == 409, f"{where}: {answer.status_code} {answer.text[:200]}"
            else:
                assert answer.status_code == 200, f"{where}: {answer.status_code} {answer.text[:200]}"
            if call.expect == "list":
                assert not set(owned.ids.values()) & _ids_in(answer.json()), f"{where} lists A's records"
            checked += 1
    assert checked == sum(c.expect != "stateless" for _, m, p in ROUTES for c in CASES[(m, p)])
    await _alice_still_can_do_everything(http, owned)


async def _bob_makes_an_agent(http: httpx.AsyncClient) -> str:
    agent = {"agent_config": {"model": "scripted-model", "instructions": "b"}}
    return str((await _ok(await http.post("/v1/agents", json=agent, headers=B)))["agent_id"])


def _nobodys_ids(body: Any, owned: Owned) -> dict[str, str]:
    """A's ids that ``body`` names (as whole values), each with an id nobody has in its place."""
    sent = json.dumps(body)
    return {v: f"nobodys-{k.removesuffix('_id')}" for k, v in owned.ids.items() if json.dumps(v) in sent}


def _replaced(text: str, ids: dict[str, str]) -> str:
    for old, new in ids.items():
        text = text.replace(old, new)
    return text


async def _call(http: httpx.AsyncClient, method: str, url: str, body: Any, call: Call) -> httpx.Response:
    headers = {**B, **call.headers}
    if call.form is not None:
        data = {k: v for k, v in call.form.items() if isinstance(v, str)}
        files = {k: v for k, v in call.form.items() if not isinstance(v, str)}
        return await http.request(method, url, data=data, files=files, headers=headers, timeout=10)
    return await http.request(method, url, json=body, params=call.query, headers=headers, timeout=10)


async def _alice_makes_knowledge(http: httpx.AsyncClient) -> dict[str, str]:
    """A file, a vector store holding it, and a batch (of a second file), all A's."""

    async def upload(name: str) -> str:
        form = {"purpose": "assistants"}
        sent = await http.post("/v1/files", data=form, files={"file": (name, b"a river", "text/plain")}, headers=A)
        return str((await _ok(sent))["id"])

    file_id = await upload("a.txt")
    store = await _ok(await http.post("/v1/vector_stores", json={"file_ids": [file_id]}, headers=A))
    batch_url = f"/v1/vector_stores/{store['id']}/file_batches"
    batch = await _ok(await http.post(batch_url, json={"file_ids": [await upload("b.txt")]}, headers=A))
    vector_db = {"vector_db_id": "alice-db", "embedding_model": "all-MiniLM-L6-v2"}
    await _ok(await http.post("/v1/vector-dbs", json=vector_db, headers=A))
    chunks = {"vector_db_id": "alice-db", "chunks": [{"content": "a river", "metadata": {"document_id": "a"}}]}
    await _ok(await http.post("/v1/vector-io/insert", json=chunks, headers=A))
    ids = {"file_id": file_id, "vector_store_id": store["id"], "batch_id": batch["id"]}
    return {**ids, "vector_db_id": "alice-db"}


def _ids_in(listing: Any) -> set[str]:
    found: set[str] = set()
    for entry in listing.get("data", []):
        found |= {v for k, v in entry.items() if k in ("agent_id", "session_id", "id", "identifier", "key")}
    return found


async def _alice_still_can_do_everything(http: httpx.AsyncClient, owned: Owned) -> None:
    ids = owned.ids
    agent, session, turn = ids["agent_id"], ids["session_id"], ids["turn_id"]
    assert ids["agent_id"] in _ids_in(await _ok(await http.get("/v1/agents", headers=A)))
    assert "alice-model" in _ids_in(await _ok(await http.get("/v1/models", headers=A)))
    assert "alice-tools" in _ids_in(await _ok(await http.get("/v1/toolgroups", headers=A)))
    assert "alice-shield" in _ids_in(await _ok(await http.get("/v1/shields", headers=A)))
    run = {"shield_id": "alice-shield", "messages": [{"role": "user", "content": "AKIAIOSFODNN7EXAMPLE"}]}
    assert (await _ok(await http.post("/v1/safety/run-shield", json=run, headers=A)))["violation"] is not None
    tools = await _ok(await http.get("/v1/tools", params={"toolgroup_id": "alice-tools"}, headers=A))
    assert [t["toolgroup_id"] for t in tools["data"]] == ["alice-tools"]
    mine = await _ok(await http.get("/v1/models/alice-model", headers=A))
    assert mine["provider_resource_id"] == "scripted-model", "B's refused registration must not re-route A's model"
    assert ids["response_id"] in _ids_in(await _ok(await http.get("/v1/responses", headers=A)))
    for url in (
        f"/v1/agents/{agent}",
        f"/v1/agents/{agent}/session/{session}",
        f"/v1/agents/{agent}/session/{session}/turn/{turn}",
        f"/v1/agents/{agent}/memory/notes/versions",
        f"/v1/responses/{ids['response_id']}",
        f"/v1/responses/{ids['response_id']}/input_items",
        f"/v1/conversations/{ids['conversation_id']}/items/{ids['item_id']}",
        "/v1/models/alice-model",
        f"/v1/files/{ids['file_id']}",
        f"/v1/vector_stores/{ids['vector_store_id']}/files/{ids['file_id']}",
        f"/v1/vector_stores/{ids['vector_store_id']}/file_batches/{ids['batch_id']}",
        f"/v1/schedules/{ids['schedule_id']}/runs",
        f"/v1/webhook_deliveries/{ids['delivery_id']}",
    ):
        await _ok(await http.get(url, headers=A))
    await _alice_still_has_her_schedule_delivery_and_compaction(http, owned)
    await _alice_still_decides_her_approval(http, owned)
    events = await http.get(f"/v1/agents/{agent}/session/{session}/turn/{turn}/events", headers=A)
    assert events.status_code == 200 and "turn_awaiting_input" in events.text
    notes = await _ok(await http.get(f"/v1/agents/{agent}/memory/notes", headers=A))
    assert (notes["value"], notes["version"]) == ("alice's", 1), "B's writes must not have reached A's block"
    paused = await _ok(await http.get(f"/v1/agents/{agent}/session/{session}/turn/{turn}", headers=A))
    assert paused["status"] == "awaiting_input", "B's resume must not have run"
    call = paused["output_message"]["tool_calls"][0]
    resumed = await _ok(
        await http.post(
            f"/v1/agents/{agent}/session/{session}/turn/{turn}/resume",
            json={"tool_responses": [{"call_id": call["call_id"], "tool_name": "get_weather", "content": "sunny"}]},
            headers=A,
        )
    )
    assert resumed["status"] == "completed"
    await _ok(await http.delete(f"/v1/schedules/{ids['schedule_id']}", headers=A))
    await _ok(await http.delete(f"/v1/agents/{agent}", headers=A))
    assert (await http.get(f"/v1/agents/{agent}", headers=A)).status_code == 404


async def _alice_still_has_her_schedule_delivery_and_compaction(http: httpx.AsyncClient, owned: Owned) -> None:
    ids = owned.ids
    schedules = await _ok(await http.get("/v1/schedules", params={"agent_id": ids["agent_id"]}, headers=A))
    assert [s["id"] for s in schedules["data"]] == [ids["schedule_id"]]
    schedule = await _ok(await http.get(f"/v1/schedules/{ids['schedule_id']}", headers=A))
    assert schedule["paused"] is False, "B's pause must not have reached A's schedule"
    paused = await _ok(await http.post(f"/v1/schedules/{ids['schedule_id']}", json={"paused": True}, headers=A))
    assert paused["paused"] is True
    deliveries = await _ok(
        await http.get("/v1/webhook_deliveries", params={"run_id": ids["hooked_turn_id"]}, headers=A)
    )
    assert [d["id"] for d in deliveries["data"]] == [ids["delivery_id"]]
    body = {"model": "scripted-model", "input": "more", "previous_response_id": ids["response_id"]}
    compacted = await _ok(await http.post("/v1/responses/compact", json=body, headers=A))
    assert compacted["object"] == "response.compaction" and compacted["output"][-1]["type"] == "compaction"


async def _alice_still_decides_her_approval(http: httpx.AsyncClient, owned: Owned) -> None:
    """A's call still waits (B's approve and deny reached nothing); A approves it and its turn completes."""
    ids = owned.ids
    waiting = await _ok(await http.get("/v1/approvals", params={"agent_id": ids["agent_id"]}, headers=A))
    assert [(a["id"], a["status"]) for a in waiting["data"]] == [(ids["approval_id"], "pending")]
    approved = await http.post(f"/v1/approvals/{ids['approval_id']}/approve", json={}, headers=A)
    assert approved.status_code == 202, approved.text
    turn = f"/v1/agents/{ids['agent_id']}/session/{ids['held_session']}/turn/{ids['held_turn_id']}"
    async with http.stream("GET", f"{turn}/events", headers=A) as events:  # followed to the turn's end
        assert events.status_code == 200
        async for _ in events.aiter_lines():
            pass
    done = await _ok(await http.get(turn, headers=A))
    assert done["status"] == "completed", done


@pytest.mark.anyio
async def test_a_request_without_a_valid_token_is_refused(served: Served) -> None:
    assert (await served.http.get("/v1/agents")).status_code == 401
    assert (await served.http.get("/v1/agents", headers={"Authorization": "Bearer nope"})).status_code == 401
