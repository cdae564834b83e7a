"""A prompt longer than the model's context is refused with 400 before anything runs or is stored.

The scripted model publishes a context of :data:`CONTEXT` tokens and records each call; its prompts are
estimated at one token per six characters (it has no tokenizer). A later inference that would not fit
fails its turn with the same code, and a model server's own "context length" refusal maps to it too.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ferryman.config import load_settings
from ferryman.server.app import build_services, services_from_settings
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedError, ScriptedModel, ScriptedReply, ScriptedToolCall
from inprocess import agent_and_session, check_script, migrated_sqlite, scripted_provider, serving
from support import free_port

pytestmark = pytest.mark.anyio

CONTEXT = 300
"""Tokens: 236 of them for the prompt, 64 kept for the answer."""
FITS = "x" * 1200  # about 200 tokens
WEATHER = {
    "name": "get_weather",
    "description": "Weather",
    "parameters": [{"name": "city", "parameter_type": "string", "description": "City", "required": True}],
}


@pytest.fixture()
def model(request: pytest.FixtureRequest) -> Iterator[ScriptedModel]:
    scripted = ScriptedModel(model_ids=("scripted-model",), context_length=CONTEXT)
    yield scripted
    check_script(request, scripted.script)


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    return tmp_path / "context.db"


@pytest.fixture()
async def http(db: Path, model: ScriptedModel) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(build_services(SqliteStore(migrated_sqlite(db)), [model], sole_process=True)) as client:
        yield client


def _count(db: Path, table: str) -> int:
    with sqlite3.connect(db) as connection:
        found: int = connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        return found


def _refused(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    return error


def _turn_url(agent_id: str, session_id: str) -> str:
    return f"/v1/agents/{agent_id}/session/{session_id}/turn"


async def test_a_turn_whose_history_outgrew_the_context_is_refused_before_it_starts(
    http: httpx.AsyncClient, model: ScriptedModel, db: Path
) -> None:
    # An agent that asks for no truncation (its default: see test_long_sessions.py).
    config = {"model": "scripted-model", "instructions": "a", "context_management": {"strategy": "disabled"}}
    agent_id = (await http.post("/v1/agents", json={"agent_config": config})).json()["agent_id"]
    session_id = (await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})).json()["session_id"]
    model.enqueue(ScriptedReply(text="y " * 300))
    first = await http.post(_turn_url(agent_id, session_id), json={"messages": [{"role": "user", "content": FITS}]})
    assert first.status_code == 200, first.text
    turns, steps = _count(db, "turns"), _count(db, "steps")

    body = {"messages": [{"role": "user", "content": "and then?"}], "stream": True}
    error = _refused(await http.post(_turn_url(agent_id, session_id), json=body))

    assert len(model.requests) == 1  # the second turn never reached the model
    assert (_count(db, "turns"), _count(db, "steps")) == (turns, steps)
    assert error["context_length"] == CONTEXT and error["answer_tokens"] == 64
    assert error["prompt_tokens"] > CONTEXT - 64
    assert error["context_source"] == "the model list of provider 'scripted'"
    assert f"context is {CONTEXT} tokens" in error["message"] and "estimated" in error["message"]


async def test_a_response_longer_than_the_context_is_refused_and_leaves_nothing_behind(
    http: httpx.AsyncClient, model: ScriptedModel, db: Path
) -> None:
    model.enqueue(ScriptedReply(text="y " * 300))
    first = await http.post("/v1/responses", json={"model": "scripted-model", "input": FITS})
    assert first.status_code == 200, first.text
    counts = [_count(db, table) for table in ("sessions", "turns", "responses")]

    chained = {"model": "scripted-model", "input": "and then?", "previous_response_id": first.json()["id"]}
    error = _refused(await http.post("/v1/responses", json=chained))
    assert error["context_length"] == CONTEXT
    huge = _refused(await http.post("/v1/responses", json={"model": "scripted-model", "input": "z" * 500_000}))
    assert huge["prompt_tokens"] > 80_000

    assert len(model.requests) == 1
    assert [_count(db, table) for table in ("sessions", "turns", "responses")] == counts


async def test_tool_results_that_overflow_the_context_fail_the_turn_before_the_model_is_asked(
    http: httpx.AsyncClient, model: ScriptedModel
) -> None:
    created = await http.post(
        "/v1/agents", json={"agent_config": {"model": "scripted-model", "instructions": "a", "client_tools": [WEATHER]}}
    )
    agent_id = created.json()["agent_id"]
    session_id = (await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})).json()["session_id"]
    model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Paris"})]))
    paused = await http.post(
        _turn_url(agent_id, session_id), json={"messages": [{"role": "user", "content": "weather?"}], "stream": False}
    )
    turn = paused.json()
    assert turn["status"] == "awaiting_input", paused.text
    call = turn["output_message"]["tool_calls"][0]

    answer = {"call_id": call["call_id"], "tool_name": "get_weather", "content": "sunny " * 400}
    resumed = await http.post(
        f"{_turn_url(agent_id, session_id)}/{turn['turn_id']}/resume",
        json={"tool_responses": [answer], "stream": False},
    )

    error = _refused(resumed)
    assert "failed: the prompt is " in error["message"]
    assert len(model.requests) == 1  # the answer to the tool result was never asked for
    session = (await http.get(f"/v1/agents/{agent_id}/session/{session_id}")).json()
    assert session["turns"][0]["status"] == "failed"
    assert session["turns"][0]["error"]["code"] == "context_length_exceeded"


@pytest.fixture()
def upstream(request: pytest.FixtureRequest) -> Iterator[Script]:
    script = Script()
    yield script
    check_script(request, script)


async def test_a_context_size_the_model_server_publishes_is_honoured(tmp_path: Path, upstream: Script) -> None:
    provider = scripted_provider(upstream, max_model_len=CONTEXT)
    services = build_services(SqliteStore(migrated_sqlite(tmp_path / "vllm.db")), [provider], sole_process=True)
    async with serving(services) as http:
        listed = (await http.get("/v1/models/scripted-model")).json()
        assert listed["metadata"] == {"context_length": CONTEXT}
        agent_id, session_id = await agent_and_session(http)
        body = {"messages": [{"role": "user", "content": FITS * 2}], "stream": False}
        error = _refused(await http.post(_turn_url(agent_id, session_id), json=body))
    assert error["context_source"] == "max_model_len in the model list of provider 'remote'"
    assert upstream.requests == []


async def test_context_sizes_from_the_config_serve_models_whose_server_publishes_none(tmp_path: Path) -> None:
    config = tmp_path / "sized.yaml"
    config.write_text(
        f"providers:\n  - provider_id: dead\n    url: http://127.0.0.1:{free_port()}/v1\n    max_retries: 0\n"
        "    context_length: 100\n"
        "models:\n  - model_id: plain\n    provider_id: dead\n"
        "  - model_id: sized\n    provider_id: dead\n    metadata: {context_length: 200}\n"
        f"storage:\n  db: {tmp_path / 'sized.db'}\n"
    )
    async with serving(services_from_settings(load_settings(str(config)))) as http:
        refused = {}
        for model in ("plain", "sized"):
            agent_id, session_id = await agent_and_session(http, model)
            body = {"messages": [{"role": "user", "content": FITS}], "stream": False}
            refused[model] = _refused(await http.post(_turn_url(agent_id, session_id), json=body))
    # Refused before the (unreachable) server is called: a call would have been a 502.
    assert (refused["plain"]["context_length"], refused["plain"]["context_source"]) == (
        100,
        "providers[].context_length of provider 'dead'",
    )
    assert (refused["sized"]["context_length"], refused["sized"]["context_source"]) == (
        200,
        "metadata.context_length of model 'sized'",
    )


@pytest.mark.parametrize(
    "refusal",
    [
        "This model's maximum context length is 2048 tokens. However, you requested 2230 tokens "
        "(1718 in the messages, 512 in the completion). Please reduce the length of the messages or completion.",
        "request (2230 tokens) exceeds the available context size (2048 tokens), try increasing it",
    ],
)
async def test_a_model_servers_context_length_refusal_fails_the_turn_as_such_not_as_a_502(
    tmp_path: Path, upstream: Script, refusal: str
) -> None:
    services = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "up.db")), [scripted_provider(upstream)], sole_process=True
    )
    async with serving(services) as http:
        agent_id, session_id = await agent_and_session(http)
        upstream.enqueue(ScriptedReply(error=ScriptedError(status_code=400, message=refusal)))
        body = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
        error = _refused(await http.post(_turn_url(agent_id, session_id), json=body))
        assert refusal in error["message"]
        session = (await http.get(f"/v1/agents/{agent_id}/session/{session_id}")).json()
    assert session["turns"][0]["error"]["code"] == "context_length_exceeded"


@pytest.mark.parametrize("stream", [True, False])
async def test_a_chat_completion_longer_than_the_context_is_refused_before_its_stream_starts(
    http: httpx.AsyncClient, model: ScriptedModel, stream: bool
) -> None:
    body = {"model": "scripted-model", "messages": [{"role": "user", "content": FITS * 2}], "stream": stream}
    error = _refused(await http.post("/v1/chat/completions", json=body))
    assert error["context_length"] == CONTEXT and error["prompt_tokens"] > CONTEXT - 64
    assert model.requests == []


@pytest.mark.parametrize("max_tokens", ["many", 1.5, True, -5])
async def test_a_chat_completions_max_tokens_that_is_no_count_is_a_400_not_a_500(
    http: httpx.AsyncClient, max_tokens: object
) -> None:
    body = {"model": "scripted-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens}
    refused = await http.post("/v1/chat/completions", json=body)
    assert refused.status_code == 400, refused.text
    assert "max_tokens must be a non-negative integer" in refused.json()["error"]["message"]
