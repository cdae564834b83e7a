"""Routing models to their providers, per-request provider data, upstream faults, plain OpenAI inference.

Ferryman runs in this process; only the slow upstream is a real server (a socket, for the client's timeout).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

from ferryman.config import Settings, StorageSettings, load_settings, providers_from_urls
from ferryman.server.app import build_services, services_from_settings
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply, ScriptedServerClient
from inprocess import BASE_URL, Served, agent_and_session, check_script, migrated_sqlite, scripted_provider, serving
from support import Proc, free_port

HEADER = "X-LlamaStack-Provider-Data"

pytestmark = pytest.mark.anyio


@dataclass
class Routed:
    """Ferryman in this process over two scripted upstreams: ``alpha`` on ``remote``, ``beta`` on ``remote-2``."""

    http: httpx.AsyncClient
    alpha: Script
    beta: Script
    db: Path


@pytest.fixture()
async def two_providers(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Routed]:
    """The providers ``ferryman serve --inference-url A/v1 --inference-url B/v1`` makes, over a SQLite file."""
    alpha, beta = Script(), Script()
    providers = [scripted_provider(alpha, ("alpha",)), scripted_provider(beta, ("beta",), "remote-2")]
    db = tmp_path / "routing.db"
    async with serving(build_services(SqliteStore(migrated_sqlite(db)), providers, sole_process=True)) as http:
        yield Routed(http, alpha, beta, db)
    check_script(request, alpha)
    check_script(request, beta)


async def _turn(
    http: httpx.AsyncClient, model: str, text: str = "hi", headers: dict[str, str] | None = None
) -> httpx.Response:
    agent_id, session_id = await agent_and_session(http, model)
    body = {"messages": [{"role": "user", "content": text}], "stream": False}
    return await http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body, headers=headers or {})


async def test_each_model_goes_to_its_own_provider(two_providers: Routed) -> None:
    http, alpha, beta = two_providers.http, two_providers.alpha, two_providers.beta
    alpha.enqueue(ScriptedReply(text="from alpha"))
    beta.enqueue(ScriptedReply(text="from beta"))
    listed = {m["identifier"]: m["provider_id"] for m in (await http.get("/v1/models")).json()["data"]}
    assert listed == {"alpha": "remote", "beta": "remote-2"}
    assert (await _turn(http, "beta")).json()["output_message"]["content"] == "from beta"
    assert (await _turn(http, "alpha")).json()["output_message"]["content"] == "from alpha"
    assert [r["model"] for r in alpha.requests] == ["alpha"]
    assert [r["model"] for r in beta.requests] == ["beta"]


async def test_unknown_model_is_a_404_naming_the_models(two_providers: Routed) -> None:
    response = await two_providers.http.get("/v1/models/gamma")
    assert response.status_code == 404
    assert "alpha" in response.json()["error"]["message"] and "beta" in response.json()["error"]["message"]


async def test_registered_models_route_and_persist(two_providers: Routed) -> None:
    http, beta = two_providers.http, two_providers.beta
    body = {
        "model_id": "fast",
        "provider_id": "remote-2",
        "provider_model_id": "beta",
        "metadata": {"context_length": 4096},
    }
    registered = await http.post("/v1/models", json=body)
    assert registered.status_code == 200, registered.text
    assert registered.json()["provider_resource_id"] == "beta"
    beta.enqueue(ScriptedReply(text="aliased"))
    assert (await _turn(http, "fast")).json()["output_message"]["content"] == "aliased"
    assert beta.requests[-1]["model"] == "beta"
    missing_provider = await http.post("/v1/models", json={"model_id": "x", "provider_id": "nope"})
    assert missing_provider.status_code == 400
    with sqlite3.connect(two_providers.db) as db:
        (body,) = db.execute("SELECT body FROM records WHERE kind = 'model' AND id = 'fast'").fetchone()
        assert json.loads(body)["provider_resource_id"] == "beta"
    assert (await http.delete("/v1/models/fast")).status_code == 200
    assert (await http.get("/v1/models/fast")).status_code == 404
    assert (await http.delete("/v1/models/alpha")).status_code == 400


async def test_provider_data_key_is_sent_upstream_per_request_and_never_stored(
    two_providers: Routed, caplog: pytest.LogCaptureFixture
) -> None:
    http, alpha = two_providers.http, two_providers.alpha
    alpha.enqueue(ScriptedReply(text="one", gate="both"), ScriptedReply(text="two", gate="both"))
    keys = ["sk-first-secret-111", "sk-second-secret-222"]
    turns = [asyncio.create_task(_turn(http, "alpha", headers={HEADER: json.dumps({"api_key": key})})) for key in keys]
    async with asyncio.timeout(15):
        await alpha.wait_for_requests(2)  # both are in flight at once
    alpha.open_gate("both")
    assert [(await turn).status_code for turn in turns] == [200, 200]
    sent = sorted(r["headers"]["authorization"] for r in alpha.requests)
    assert sent == [f"Bearer {key}" for key in keys]
    stored = b"".join(p.read_bytes() for p in two_providers.db.parent.glob("routing.db*"))
    for key in keys:
        assert key.encode() not in stored and key not in caplog.text


async def test_per_kind_key_names_do_not_leak_to_other_providers(two_providers: Routed) -> None:
    two_providers.alpha.enqueue(ScriptedReply(text="ok"))
    data = {"openai_api_key": "sk-only-for-openai", "remote_api_key": "sk-for-remote"}
    assert (await _turn(two_providers.http, "alpha", headers={HEADER: json.dumps(data)})).status_code == 200
    assert two_providers.alpha.requests[0]["headers"]["authorization"] == "Bearer sk-for-remote"


async def test_malformed_provider_data_is_a_400(two_providers: Routed) -> None:
    response = await _turn(two_providers.http, "alpha", headers={HEADER: "not json"})
    assert response.status_code == 400 and HEADER in response.json()["error"]["message"]


async def test_slow_upstream_hits_the_timeout_and_fails_the_turn_clearly(
    tmp_path: Path, scripted_proc: tuple[Proc, str], served_model: ScriptedServerClient
) -> None:
    # A real socket: the client's timeout is what is under test, and ASGI transports have none.
    served_model.enqueue(*[_slow("too late") for _ in range(2)])
    limits = Settings(providers=providers_from_urls([f"{scripted_proc[1]}/v1"], 0.3, 1))  # --inference-timeout/-retries
    settings = limits.model_copy(update={"storage": StorageSettings(db=str(tmp_path / "slow.db"))})
    async with serving(services_from_settings(settings)) as http:
        response = await _turn(http, "scripted-model")
    assert response.status_code == 502
    assert "timed out" in response.json()["error"]["message"].lower()
    assert len(served_model.requests()) == 2


async def test_unreachable_provider_fails_the_turn_after_bounded_retries(tmp_path: Path) -> None:
    config = tmp_path / "dead.yaml"
    config.write_text(
        f"providers:\n  - provider_id: dead\n    url: http://127.0.0.1:{free_port()}/v1\n    max_retries: 1\n"
        f"models:\n  - model_id: ghost\n    provider_id: dead\nstorage:\n  db: {tmp_path / 'dead.db'}\n"
    )
    async with serving(services_from_settings(load_settings(str(config)))) as http:
        response = await _turn(http, "ghost")
    assert response.status_code == 502
    assert "connection" in response.json()["error"]["message"].lower()


def _slow(text: str) -> ScriptedReply:
    return ScriptedReply(text=text, delay=2.0)


def test_openai_sdk_chat_completions_pass_through(model: Served) -> None:
    client = openai.OpenAI(
        base_url=f"{BASE_URL}/v1", http_client=model.sdk_http_client(), api_key="unused", max_retries=0
    )
    model.enqueue_text("plain answer")
    completion = client.chat.completions.create(
        model="scripted-model", messages=[{"role": "user", "content": "hi"}], temperature=0.2
    )
    assert completion.choices[0].message.content == "plain answer"
    assert model.requests()[-1]["temperature"] == 0.2
    model.enqueue_text("streamed answer")
    stream = client.chat.completions.create(
        model="scripted-model", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "streamed answer"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])


def test_openai_sdk_embeddings_pass_through(model: Served) -> None:
    client = openai.OpenAI(
        base_url=f"{BASE_URL}/v1", http_client=model.sdk_http_client(), api_key="unused", max_retries=0
    )
    result = client.embeddings.create(model="scripted-model", input=["alpha", "beta"])
    assert [len(item.embedding) for item in result.data] == [8, 8]
    assert result.data[0].embedding != result.data[1].embedding
    assert model.requests()[-1]["embeddings"]["input"] == ["alpha", "beta"]
