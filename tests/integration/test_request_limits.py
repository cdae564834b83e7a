"""Every size a caller controls has a limit: 413 for a body over its limit (refused while it arrives), 400 for
a field over its maximum, each error naming the limit; records stored before a limit stay readable."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ferryman.api.agents import AgentConfig
from ferryman.api.limits import (
    MAX_DOCUMENTS,
    MAX_INSTRUCTIONS_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_MESSAGES,
    MAX_SEARCH_QUERY_CHARS,
    MAX_TOOLS,
)
from ferryman.config import load_settings
from ferryman.server.app import Services, build_services, openapi
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel
from inprocess import migrated_sqlite, serving

pytestmark = pytest.mark.anyio

BODY_LIMIT = 64 * 1024
CHUNK = 16 * 1024
SENT = 4 * 1024 * 1024
MIB = 1024 * 1024


@pytest.fixture()
async def app(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Services]]:
    services = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "limits.db")), [ScriptedModel()], max_body_bytes=BODY_LIMIT
    )
    async with serving(services) as http:
        yield http, services


@pytest.fixture()
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app with the default limits."""
    services = build_services(SqliteStore(migrated_sqlite(tmp_path / "default.db")), [ScriptedModel()])
    async with serving(services) as client:
        yield client


# One route of each family that takes a JSON body; an oversized body is refused whatever the ids say.
ROUTES = {
    "agents": "/v1/agents",
    "turns": "/v1/agents/a/session/s/turn",
    "responses": "/v1/responses",
    "conversations": "/v1/conversations",
    "vector store search": "/v1/vector_stores/vs_1/search",
}


class _Counting:
    """A request body sent in chunks, counting what the server pulled of it."""

    def __init__(self, prefix: bytes, total: int = SENT) -> None:
        self.prefix, self.total, self.pulled = prefix, total, 0

    async def chunks(self) -> AsyncIterator[bytes]:
        self.pulled += len(self.prefix)
        yield self.prefix
        while self.pulled < self.total:
            self.pulled += CHUNK
            yield b"x" * CHUNK


def _refused(answer: httpx.Response, most: int, setting: str = "server.max_body_bytes") -> None:
    assert answer.status_code == 413, answer.text
    error = answer.json()["error"]
    assert error["code"] == "payload_too_large"
    assert error["message"] == f"the request body is larger than the limit of {most} bytes ({setting})"


@pytest.mark.parametrize("family", list(ROUTES))
async def test_a_json_body_over_the_limit_is_refused_as_it_arrives(
    app: tuple[httpx.AsyncClient, Services], family: str
) -> None:
    http, _ = app
    body = _Counting(b'{"instructions": "')
    answer = await http.post(ROUTES[family], content=body.chunks(), headers={"content-type": "application/json"})
    _refused(answer, BODY_LIMIT)
    assert body.pulled <= BODY_LIMIT + CHUNK  # up to the chunk that passed the limit, never the 4 MiB sent


@pytest.mark.parametrize("family", list(ROUTES))
async def test_a_declared_length_over_the_limit_is_refused_before_reading(
    app: tuple[httpx.AsyncClient, Services], family: str
) -> None:
    http, _ = app
    body = _Counting(b"{")
    headers = {"content-type": "application/json", "content-length": str(SENT)}
    answer = await http.post(ROUTES[family], content=body.chunks(), headers=headers)
    _refused(answer, BODY_LIMIT)
    assert body.pulled <= CHUNK  # at most what the transport pulled ahead


async def test_a_keyed_request_over_the_limit_is_refused_and_keeps_no_key(
    app: tuple[httpx.AsyncClient, Services],
) -> None:
    http, _ = app
    body = _Counting(b'{"model": "scripted-model", "input": "')
    headers = {"content-type": "application/json", "idempotency-key": "k1"}
    answer = await http.post("/v1/responses", content=body.chunks(), headers=headers)
    _refused(answer, BODY_LIMIT)
    assert body.pulled <= BODY_LIMIT + CHUNK
    config = {"agent_config": {"model": "scripted-model", "instructions": "hi"}}
    again = await http.post("/v1/agents", json=config, headers={"idempotency-key": "k1"})
    assert again.status_code == 200, again.text


async def test_a_body_within_the_limit_is_served(app: tuple[httpx.AsyncClient, Services]) -> None:
    http, _ = app
    instructions = "x" * (BODY_LIMIT - 200)
    config = {"agent_config": {"model": "scripted-model", "instructions": instructions}}
    created = await http.post("/v1/agents", json=config)
    assert created.status_code == 200, created.text
    assert (await http.get("/v1/agents")).json()["data"][0]["agent_config"]["instructions"] == instructions


async def test_the_default_json_limit_is_ten_mib_and_set_under_server(tmp_path: Path) -> None:
    assert load_settings(None).max_body_bytes == 10 * MIB
    config = tmp_path / "ferryman.yaml"
    config.write_text("server:\n  max_body_bytes: 2048\n")
    assert load_settings(str(config)).max_body_bytes == 2048
    services = build_services(SqliteStore(migrated_sqlite(tmp_path / "default.db")), [ScriptedModel()])
    async with serving(services) as http:
        headers = {"content-type": "application/json", "content-length": str(10 * MIB + 1)}
        _refused(await http.post("/v1/agents", content=b"{}", headers=headers), 10 * MIB)


def _field_error(answer: httpx.Response, field: str, most: int) -> str:
    assert answer.status_code == 400, answer.text[:500]
    error = answer.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["field"] == field
    assert f"at most {most} " in error["message"]
    return str(error["message"])


async def _agent(http: httpx.AsyncClient, **config: Any) -> httpx.Response:
    return await http.post(
        "/v1/agents", json={"agent_config": {"model": "scripted-model", "instructions": "", **config}}
    )


async def _session(http: httpx.AsyncClient) -> tuple[str, str]:
    agent_id = (await _agent(http)).json()["agent_id"]
    session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
    return agent_id, session.json()["session_id"]


async def test_agent_fields_over_their_maxima_are_refused(http: httpx.AsyncClient) -> None:
    long = await _agent(http, instructions="x" * (MAX_INSTRUCTIONS_CHARS + 1))
    message = _field_error(long, "agent_config.instructions", MAX_INSTRUCTIONS_CHARS)
    assert message == f"invalid field 'agent_config.instructions': at most 1048576 characters (got {MIB + 1})"
    _field_error(await _agent(http, name="n" * 257), "agent_config.name", 256)
    _field_error(await _agent(http, model="m" * 257), "agent_config.model", 256)
    groups = ["builtin::rag"] * (MAX_TOOLS + 1)
    _field_error(await _agent(http, toolgroups=groups), "agent_config.toolgroups", MAX_TOOLS)
    tools = [{"name": f"t{i}"} for i in range(MAX_TOOLS + 1)]
    _field_error(await _agent(http, client_tools=tools), "agent_config.client_tools", MAX_TOOLS)
    assert (await http.get("/v1/agents")).json()["data"] == []
    assert (await _agent(http, instructions="x" * MAX_INSTRUCTIONS_CHARS, name="n" * 256)).status_code == 200

    agent_id = (await _agent(http)).json()["agent_id"]
    named = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s" * 257})
    _field_error(named, "session_name", 256)


async def test_turn_fields_over_their_maxima_are_refused(http: httpx.AsyncClient) -> None:
    agent_id, session_id = await _session(http)
    turn = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    text = await http.post(turn, json={"messages": [{"role": "user", "content": "x" * (MAX_MESSAGE_CHARS + 1)}]})
    _field_error(text, "messages.0.user.content", MAX_MESSAGE_CHARS)
    parts = [{"type": "text", "text": "x" * (MAX_MESSAGE_CHARS + 1)}]
    in_parts = await http.post(turn, json={"messages": [{"role": "user", "content": parts}]})
    assert in_parts.status_code == 400 and f"at most {MAX_MESSAGE_CHARS} characters" in in_parts.text
    results = [{"call_id": "c", "tool_name": "t", "content": "x" * (MAX_MESSAGE_CHARS + 1)}]
    resumed = await http.post(f"{turn}/t1/resume", json={"tool_responses": results})
    _field_error(resumed, "tool_responses.0.content", MAX_MESSAGE_CHARS)
    hello = {"role": "user", "content": "hi"}
    many = await http.post(turn, json={"messages": [hello] * (MAX_MESSAGES + 1)})
    _field_error(many, "messages", MAX_MESSAGES)
    documents = [{"content": "d", "mime_type": "text/plain"}] * (MAX_DOCUMENTS + 1)
    _field_error(await http.post(turn, json={"messages": [hello], "documents": documents}), "documents", 20)
    groups = ["builtin::rag"] * (MAX_TOOLS + 1)
    _field_error(await http.post(turn, json={"messages": [hello], "toolgroups": groups}), "toolgroups", MAX_TOOLS)
    session = await http.get(f"/v1/agents/{agent_id}/session/{session_id}")
    assert session.json()["turns"] == []


async def test_response_and_conversation_fields_over_their_maxima_are_refused(http: httpx.AsyncClient) -> None:

    async def respond(**body: Any) -> httpx.Response:
        return await http.post("/v1/responses", json={"model": "scripted-model", "input": "hi", **body})

    _field_error(await respond(input="x" * (MAX_MESSAGE_CHARS + 1)), "input", MAX_MESSAGE_CHARS)
    _field_error(await respond(instructions="x" * (MAX_INSTRUCTIONS_CHARS + 1)), "instructions", MIB)
    items = [{"role": "user", "content": "hi"}] * (MAX_MESSAGES + 1)
    _field_error(await respond(input=items), "input", MAX_MESSAGES)
    tools = [{"type": "function", "name": f"f{i}"} for i in range(MAX_TOOLS + 1)]
    _field_error(await respond(tools=tools), "tools", MAX_TOOLS)
    _field_error(await respond(metadata={f"k{i}": "v" for i in range(17)}), "metadata", 16)
    _field_error(await respond(metadata={"k" * 65: "v"}), f"metadata.{'k' * 65}.[key]", 64)
    _field_error(await respond(metadata={"k": "v" * 513}), "metadata.k", 512)
    _field_error(await respond(previous_response_id="r" * 257), "previous_response_id", 256)
    assert (await http.get("/v1/responses")).json()["data"] == []

    conversation = await http.post("/v1/conversations", json={"metadata": {f"k{i}": "v" for i in range(17)}})
    _field_error(conversation, "metadata", 16)
    too_many = await http.post("/v1/conversations", json={"items": items})
    _field_error(too_many, "items", MAX_MESSAGES)
    created = (await http.post("/v1/conversations", json={"metadata": {"k": "v" * 512}})).json()
    update = await http.post(f"/v1/conversations/{created['id']}", json={"metadata": {"k": "v" * 513}})
    _field_error(update, "metadata.k", 512)
    long_item = [{"type": "message", "role": "user", "content": "x" * (MAX_MESSAGE_CHARS + 1)}]
    added = await http.post(f"/v1/conversations/{created['id']}/items", json={"items": long_item})
    _field_error(added, "items.0.message.content", MAX_MESSAGE_CHARS)


async def test_a_two_mib_search_query_is_refused_at_once(http: httpx.AsyncClient) -> None:
    # The query is checked before the store is looked up: a query within the limit reaches the lookup (404).
    search = "/v1/vector_stores/vs_missing/search"
    started = time.monotonic()
    answer = await http.post(search, content=json.dumps({"query": "q" * (2 * MIB)}).encode())
    assert time.monotonic() - started < 2
    _field_error(answer, "query", MAX_SEARCH_QUERY_CHARS)
    listed = await http.post(search, json={"query": ["ok", "q" * (MAX_SEARCH_QUERY_CHARS + 1)]})
    _field_error(listed, "query.1", MAX_SEARCH_QUERY_CHARS)
    assert (await http.post(search, json={"query": "q" * MAX_SEARCH_QUERY_CHARS})).status_code == 404
    rag = {"content": "q" * (MAX_SEARCH_QUERY_CHARS + 1), "vector_db_ids": ["db1"]}
    _field_error(await http.post("/v1/tool-runtime/rag-tool/query", json=rag), "content", MAX_SEARCH_QUERY_CHARS)
    parts = [{"type": "text", "text": "q" * 3000}] * 2
    query = await http.post("/v1/vector-io/query", json={"vector_db_id": "db1", "query": parts})
    _field_error(query, "query", MAX_SEARCH_QUERY_CHARS)


async def test_records_stored_before_a_limit_stay_readable(app: tuple[httpx.AsyncClient, Services]) -> None:
    http, services = app
    # Stored as an older version (or a lower limit) let it: read back without the request limits.
    oversized = AgentConfig(model="scripted-model", instructions="x" * (MAX_INSTRUCTIONS_CHARS + 1), name="n" * 300)
    agent_id = await services.agents.create_agent(oversized)
    listed = await http.get("/v1/agents")
    assert listed.status_code == 200
    assert len(listed.json()["data"][0]["agent_config"]["instructions"]) == MAX_INSTRUCTIONS_CHARS + 1
    assert (await http.get(f"/v1/agents/{agent_id}")).status_code == 200


def test_the_openapi_document_states_the_maxima() -> None:
    schemas = openapi()["components"]["schemas"]

    def properties(name: str) -> dict[str, Any]:
        found: dict[str, Any] = schemas.get(f"{name}-Input", schemas.get(name))
        return dict(found["properties"])

    config = properties("AgentConfig")
    assert config["instructions"]["maxLength"] == MAX_INSTRUCTIONS_CHARS
    name = next(s for s in config["name"]["anyOf"] if s.get("type") == "string")
    assert name["maxLength"] == 256 and name["pattern"] == "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
    turn = properties("CreateTurnRequest")
    assert turn["messages"]["maxItems"] == MAX_MESSAGES
    assert next(s for s in turn["documents"]["anyOf"] if s.get("type") == "array")["maxItems"] == MAX_DOCUMENTS
    response = properties("CreateResponseRequest")
    metadata = next(s for s in response["metadata"]["anyOf"] if s.get("type") == "object")
    assert metadata["maxProperties"] == 16
    assert metadata["propertyNames"] == {"maxLength": 64}
    assert metadata["additionalProperties"]["maxLength"] == 512
    assert response["tools"]["maxItems"] == MAX_TOOLS
    search = properties("SearchRequest")
    assert next(s for s in search["query"]["anyOf"] if s.get("type") == "string")["maxLength"] == 4096
    turn_post = openapi()["paths"]["/v1/agents/{agent_id}/session/{session_id}/turn"]["post"]
    assert "413" in turn_post["responses"]
    assert all(p["schema"]["maxLength"] == 256 for p in turn_post["parameters"] if p["in"] == "path")
    # Answers are not bounded by what a request may hold.
    assert "maxLength" not in schemas["AgentConfig-Output"]["properties"]["instructions"]


async def test_a_chat_completion_s_messages_and_tools_are_counted(http: httpx.AsyncClient) -> None:
    hello = {"role": "user", "content": "hi"}
    many = await http.post(
        "/v1/chat/completions", json={"model": "scripted-model", "messages": [hello] * (MAX_MESSAGES + 1)}
    )
    _field_error(many, "messages", MAX_MESSAGES)
    tools = [{"type": "function", "function": {"name": f"f{i}"}} for i in range(MAX_TOOLS + 1)]
    too_many = await http.post(
        "/v1/chat/completions", json={"model": "scripted-model", "messages": [hello], "tools": tools}
    )
    _field_error(too_many, "tools", MAX_TOOLS)
    schema = openapi()["components"]["schemas"]
    request = schema.get("OpenAIRequest-Input", schema.get("OpenAIRequest"))
    assert next(s for s in request["properties"]["messages"]["anyOf"] if s.get("type") == "array")["maxItems"] == 1000


async def test_one_message_s_text_is_bounded_across_its_parts(http: httpx.AsyncClient) -> None:
    half = MAX_MESSAGE_CHARS // 2 + 1
    agent_id, session_id = await _session(http)
    parts = [{"type": "text", "text": "x" * half}] * 2
    turn = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    answer = await http.post(turn, json={"messages": [{"role": "user", "content": parts}]})
    _field_error(answer, "messages.0.user.content", MAX_MESSAGE_CHARS)
    assert f"at most {MAX_MESSAGE_CHARS} characters of text (got {2 * half})" in answer.json()["error"]["message"]
    results = [{"call_id": "c", "tool_name": "t", "content": parts}]
    _field_error(
        await http.post(f"{turn}/t1/resume", json={"tool_responses": results}),
        "tool_responses.0.content",
        MAX_MESSAGE_CHARS,
    )
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x" * half}] * 2}]
    response = await http.post("/v1/responses", json={"model": "scripted-model", "input": items})
    _field_error(response, "input.0.message.content", MAX_MESSAGE_CHARS)
    assert (await http.get(f"/v1/agents/{agent_id}/session/{session_id}")).json()["turns"] == []
    assert (await http.get("/v1/responses")).json()["data"] == []
