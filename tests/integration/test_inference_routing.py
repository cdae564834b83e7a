"""Routing models to their providers, per-request provider data, upstream faults, plain OpenAI inference."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest
from integration_helpers import wait_for_requests

from ferryman.testing import ScriptedReply, ScriptedServerClient
from inprocess import BASE_URL, Served
from support import create_session, ferryman_server, free_port, running, scripted_server

HEADER = "X-LlamaStack-Provider-Data"


@pytest.fixture()
def two_providers(tmp_path: Path) -> Iterator[tuple[str, ScriptedServerClient, ScriptedServerClient, Path]]:
    """Ferryman over two scripted servers: ``alpha`` served by the first, ``beta`` by the second."""
    first, first_url = scripted_server(tmp_path, "alpha")
    second, second_url = scripted_server(tmp_path, "beta")
    db = tmp_path / "routing.db"
    with running(first), running(second):
        server, base = ferryman_server(tmp_path, first_url, db, "--inference-url", f"{second_url}/v1")
        alpha, beta = ScriptedServerClient(first_url), ScriptedServerClient(second_url)
        with running(server):
            yield base, alpha, beta, tmp_path
        alpha.close()
        beta.close()


def _turn(http: httpx.Client, model: str, text: str = "hi", headers: dict[str, str] | None = None) -> httpx.Response:
    agent = http.post("/v1/agents", json={"agent_config": {"model": model, "instructions": "x"}}).json()["agent_id"]
    session = create_session(http, agent)
    body = {"messages": [{"role": "user", "content": text}], "stream": False}
    return http.post(f"/v1/agents/{agent}/session/{session}/turn", json=body, headers=headers or {})


def test_each_model_goes_to_its_own_provider(
    two_providers: tuple[str, ScriptedServerClient, ScriptedServerClient, Path],
) -> None:
    base, alpha, beta, _ = two_providers
    alpha.enqueue_text("from alpha")
    beta.enqueue_text("from beta")
    with httpx.Client(base_url=base, timeout=30) as http:
        listed = {m["identifier"]: m["provider_id"] for m in http.get("/v1/models").json()["data"]}
        assert listed == {"alpha": "remote", "beta": "remote-2"}
        assert _turn(http, "beta").json()["output_message"]["content"] == "from beta"
        assert _turn(http, "alpha").json()["output_message"]["content"] == "from alpha"
    assert [r["model"] for r in alpha.requests()] == ["alpha"]
    assert [r["model"] for r in beta.requests()] == ["beta"]


def test_unknown_model_is_a_404_naming_the_models(
    two_providers: tuple[str, ScriptedServerClient, ScriptedServerClient, Path],
) -> None:
    with httpx.Client(base_url=two_providers[0], timeout=30) as http:
        response = http.get("/v1/models/gamma")
    assert response.status_code == 404
    assert "alpha" in response.json()["error"]["message"] and "beta" in response.json()["error"]["message"]


def test_registered_models_route_and_persist(
    two_providers: tuple[str, ScriptedServerClient, ScriptedServerClient, Path],
) -> None:
    base, _, beta, tmp = two_providers
    with httpx.Client(base_url=base, timeout=30) as http:
        body = {
            "model_id": "fast",
            "provider_id": "remote-2",
            "provider_model_id": "beta",
            "metadata": {"context_length": 4096},
        }
        registered = http.post("/v1/models", json=body)
        assert registered.status_code == 200, registered.text
        assert registered.json()["provider_resource_id"] == "beta"
        beta.enqueue_text("aliased")
        assert _turn(http, "fast").json()["output_message"]["content"] == "aliased"
        assert beta.requests()[-1]["model"] == "beta"
        missing_provider = http.post("/v1/models", json={"model_id": "x", "provider_id": "nope"})
        assert missing_provider.status_code == 400
    with sqlite3.connect(tmp / "routing.db") as db:
        assert db.execute("SELECT provider_resource_id FROM models WHERE model_id = 'fast'").fetchone() == ("beta",)
    with httpx.Client(base_url=base, timeout=30) as http:
        assert http.delete("/v1/models/fast").status_code == 200
        assert http.get("/v1/models/fast").status_code == 404
        assert http.delete("/v1/models/alpha").status_code == 400


def test_provider_data_key_is_sent_upstream_per_request_and_never_stored(
    two_providers: tuple[str, ScriptedServerClient, ScriptedServerClient, Path],
) -> None:
    base, alpha, _, tmp = two_providers
    alpha.enqueue_text("one", gate="both")
    alpha.enqueue_text("two", gate="both")
    keys = ["sk-first-secret-111", "sk-second-secret-222"]

    def run(key: str) -> int:
        with httpx.Client(base_url=base, timeout=30) as http:
            return _turn(http, "alpha", headers={HEADER: json.dumps({"api_key": key})}).status_code

    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(run, key) for key in keys]
        wait_for_requests(alpha, 2)
        alpha.open_gate("both")
        assert [f.result() for f in futures] == [200, 200]
    sent = sorted(r["headers"]["authorization"] for r in alpha.requests())
    assert sent == [f"Bearer {key}" for key in keys]
    stored = b"".join(p.read_bytes() for p in tmp.glob("routing.db*"))
    logs = b"".join(p.read_bytes() for p in tmp.glob("*.log"))
    for key in keys:
        assert key.encode() not in stored and key.encode() not in logs


def test_per_kind_key_names_do_not_leak_to_other_providers(
    two_providers: tuple[str, ScriptedServerClient, ScriptedServerClient, Path],
) -> None:
    base, alpha, _, _ = two_providers
    alpha.enqueue_text("ok")
    with httpx.Client(base_url=base, timeout=30) as http:
        data = {"openai_api_key": "sk-only-for-openai", "remote_api_key": "sk-for-remote"}
        assert _turn(http, "alpha", headers={HEADER: json.dumps(data)}).status_code == 200
    assert alpha.requests()[0]["headers"]["authorization"] == "Bearer sk-for-remote"


def test_malformed_provider_data_is_a_400(
    two_providers: tuple[str, ScriptedServerClient, ScriptedServerClient, Path],
) -> None:
    with httpx.Client(base_url=two_providers[0], timeout=30) as http:
        response = _turn(http, "alpha", headers={HEADER: "not json"})
    assert response.status_code == 400 and HEADER in response.json()["error"]["message"]


def test_slow_upstream_hits_the_timeout_and_fails_the_turn_clearly(tmp_path: Path) -> None:
    scripted, root = scripted_server(tmp_path)
    with running(scripted):
        model = ScriptedServerClient(root)
        model.enqueue(*[_slow("too late") for _ in range(2)])
        limits = ("--inference-timeout", "0.3", "--inference-retries", "1")
        server, base = ferryman_server(tmp_path, root, tmp_path / "slow.db", *limits)
        with running(server), httpx.Client(base_url=base, timeout=30) as http:
            response = _turn(http, "scripted-model")
            assert response.status_code == 502
            assert "timed out" in response.json()["error"]["message"].lower()
            assert len(model.requests()) == 2
        model.close()


def test_unreachable_provider_fails_the_turn_after_bounded_retries(tmp_path: Path) -> None:
    config = tmp_path / "dead.yaml"
    config.write_text(
        f"providers:\n  - provider_id: dead\n    url: http://127.0.0.1:{free_port()}/v1\n    max_retries: 1\n"
        "models:\n  - model_id: ghost\n    provider_id: dead\n"
    )
    server, base = ferryman_server(tmp_path, None, tmp_path / "dead.db", "--config", str(config))
    with running(server), httpx.Client(base_url=base, timeout=30) as http:
        response = _turn(http, "ghost")
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
