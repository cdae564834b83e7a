"""A model server refusing a key: the operator's configured key is a server fault, the client's own key is not."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from ferryman.inference.openai_remote import OpenAICompatibleProvider
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedServerClient
from inprocess import agent_and_session, migrated_sqlite, serving
from support import Proc

OPERATOR_KEY = "sk-operator-0123456789"
CLIENT_KEY = "sk-client-9876543210"
CLIENT_HEADERS = {"X-LlamaStack-Provider-Data": json.dumps({"api_key": CLIENT_KEY})}


@pytest.fixture()
async def http(
    tmp_path: Path, scripted_proc: tuple[Proc, str], served_model: ScriptedServerClient
) -> AsyncIterator[httpx.AsyncClient]:
    """Ferryman in this process over the scripted model server, as provider ``upstream`` with the operator's key."""
    provider = OpenAICompatibleProvider("upstream", f"{scripted_proc[1]}/v1", api_key=OPERATOR_KEY, max_retries=0)
    async with serving(build_services(SqliteStore(migrated_sqlite(tmp_path / "auth.db")), [provider])) as client:
        yield client


def _rejects_keys(served_model: ScriptedServerClient, status: int) -> None:
    # Upstream servers often quote the key they refused.
    served_model.enqueue_error(status, f"Incorrect API key provided: {OPERATOR_KEY} / {CLIENT_KEY}")


def _assert_no_key(response: httpx.Response) -> None:
    assert OPERATOR_KEY not in response.text and CLIENT_KEY not in response.text


async def _turn(http: httpx.AsyncClient, headers: dict[str, str] | None = None) -> httpx.Response:
    agent_id, session_id = await agent_and_session(http)
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
    return await http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body, headers=headers or {})


async def _chat(http: httpx.AsyncClient, headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"model": "scripted-model", "messages": [{"role": "user", "content": "hi"}]}
    return await http.post("/v1/chat/completions", json=body, headers=headers or {})


@pytest.mark.anyio
@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("call", [_turn, _chat], ids=["turn", "chat_completion"])
async def test_the_configured_key_refused_upstream_is_a_502_naming_the_provider(
    http: httpx.AsyncClient, served_model: ScriptedServerClient, status: int, call: object
) -> None:
    _rejects_keys(served_model, status)
    response = await call(http)  # type: ignore[operator]
    assert response.status_code == 502, response.text
    error = response.json()["error"]
    assert error["code"] == "upstream_error" and "'upstream'" in error["message"]
    _assert_no_key(response)


@pytest.mark.anyio
@pytest.mark.parametrize("call", [_turn, _chat], ids=["turn", "chat_completion"])
async def test_the_clients_own_key_refused_upstream_is_the_clients_error(
    http: httpx.AsyncClient, served_model: ScriptedServerClient, call: object
) -> None:
    _rejects_keys(served_model, 401)
    response = await call(http, CLIENT_HEADERS)  # type: ignore[operator]
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "provider_key_rejected" and "'upstream'" in error["message"]
    if call is _chat:  # a turn's stored failure keeps its code and message only
        assert error["field"] == "X-LlamaStack-Provider-Data"
    _assert_no_key(response)
    [request] = served_model.requests()
    assert request["headers"]["authorization"] == f"Bearer {CLIENT_KEY}"


@pytest.mark.anyio
@pytest.mark.parametrize("call", [_turn, _chat], ids=["turn", "chat_completion"])
@pytest.mark.parametrize("key", [f"{CLIENT_KEY}\r\nX-Injected: 1", f"{CLIENT_KEY}\u20ac"], ids=["crlf", "non_ascii"])
async def test_a_key_that_cannot_be_a_header_is_refused_before_anything_is_sent(
    http: httpx.AsyncClient, served_model: ScriptedServerClient, call: object, key: str
) -> None:
    headers = {"X-LlamaStack-Provider-Data": json.dumps({"api_key": key})}
    response = await call(http, headers)  # type: ignore[operator]
    assert response.status_code == 400, response.text
    assert response.json()["error"]["field"] == "X-LlamaStack-Provider-Data"
    assert CLIENT_KEY not in response.text
    assert served_model.requests() == []
