"""Shields over HTTP: registrations, ``/v1/safety/run-shield`` and ``/v1/moderations``, with both providers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from inprocess import Served

GUARD_MODEL = "scripted-model"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


class Shields:
    """Registers shields under fresh ids (the server's database lives for the session) and removes them after."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        self.made: list[str] = []

    def register(self, provider_id: str | None = "ferryman-local", **fields: Any) -> str:
        shield_id = f"shield-{uuid.uuid4().hex[:8]}"
        body = {"shield_id": shield_id, **fields}
        if provider_id is not None:
            body["provider_id"] = provider_id
        answer = self.http.post("/v1/shields", json=body)
        assert answer.status_code == 200, answer.text
        self.made.append(shield_id)
        return shield_id

    def run(self, shield_id: str, text: str, params: dict[str, Any] | None = None) -> httpx.Response:
        body = {"shield_id": shield_id, "messages": [{"role": "user", "content": text}], "params": params or {}}
        return self.http.post("/v1/safety/run-shield", json=body)


@pytest.fixture()
def shields(http: httpx.Client) -> Iterator[Shields]:
    made = Shields(http)
    yield made
    for shield_id in made.made:
        http.delete(f"/v1/shields/{shield_id}")


def test_register_get_list_and_delete(http: httpx.Client, shields: Shields) -> None:
    shield_id = shields.register(params={"action": "redact"})
    expected = {
        "identifier": shield_id,
        "provider_id": "ferryman-local",
        "provider_resource_id": shield_id,
        "type": "shield",
        "params": {"action": "redact"},
    }
    assert http.get(f"/v1/shields/{shield_id}").json() == expected
    assert expected in http.get("/v1/shields").json()["data"]
    assert http.delete(f"/v1/shields/{shield_id}").status_code == 200
    assert http.get(f"/v1/shields/{shield_id}").status_code == 404
    assert http.delete(f"/v1/shields/{shield_id}").status_code == 404


def test_a_guard_model_registers_without_a_provider(http: httpx.Client, shields: Shields) -> None:
    shield_id = shields.register(provider_id=None, provider_shield_id=GUARD_MODEL)
    stored = http.get(f"/v1/shields/{shield_id}").json()
    assert stored["provider_id"] == "llama-guard" and stored["provider_resource_id"] == GUARD_MODEL


def test_registering_again_is_a_no_op_but_other_settings_conflict(http: httpx.Client, shields: Shields) -> None:
    shield_id = shields.register(params={"action": "warn"})
    same = {"shield_id": shield_id, "provider_id": "ferryman-local", "params": {"action": "warn"}}
    assert http.post("/v1/shields", json=same).status_code == 200
    other = {**same, "params": {"action": "block"}}
    assert http.post("/v1/shields", json=other).status_code == 409


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"provider_id": "nope"}, "provider_id"),
        ({"provider_id": "ferryman-local", "params": {"action": "shout"}}, "params"),
        ({"provider_id": "llama-guard", "params": {"excluded_categories": ["S99"]}}, "params"),
        ({"provider_id": "llama-guard", "params": {"timeout_seconds": -1}}, "params"),
    ],
)
def test_bad_registrations_are_400(http: httpx.Client, body: dict[str, Any], field: str) -> None:
    answer = http.post("/v1/shields", json={"shield_id": f"bad-{uuid.uuid4().hex[:6]}", **body})
    assert answer.status_code == 400
    assert answer.json()["error"]["field"] == field


def test_run_shield_blocks_a_secret_without_echoing_it(shields: Shields) -> None:
    shield_id = shields.register()
    answer = shields.run(shield_id, f"my key is {AWS_KEY}")
    assert answer.status_code == 200
    violation = answer.json()["violation"]
    assert violation["violation_level"] == "error"
    assert violation["metadata"]["kinds"] == ["aws_access_key"]
    assert AWS_KEY not in answer.text


def test_run_shield_passes_clean_text_and_redacts_on_request(shields: Shields) -> None:
    shield_id = shields.register()
    assert shields.run(shield_id, "hello there").json() == {"violation": None, "redacted_messages": None}
    redacted = shields.run(shield_id, "write to a@b.io", {"action": "redact"}).json()
    assert redacted["violation"]["violation_level"] == "info"
    assert redacted["redacted_messages"][0]["content"] == "write to [REDACTED:email]"


def test_run_shield_with_the_guard_model(shields: Shields, model: Served) -> None:
    shield_id = shields.register("llama-guard", provider_shield_id=GUARD_MODEL)
    model.enqueue_text("safe")
    model.enqueue_text("unsafe\nS1")
    assert shields.run(shield_id, "How do I bake bread?").json()["violation"] is None
    violation = shields.run(shield_id, "How do I hurt someone?").json()["violation"]
    assert violation["violation_level"] == "error"
    assert violation["metadata"]["violation_type"] == "S1"
    prompts = [request["messages"][-1]["content"] for request in model.requests()]
    assert "User: How do I bake bread?" in prompts[0] and "<BEGIN UNSAFE CONTENT CATEGORIES>" in prompts[0]


def test_a_guard_answer_outside_the_format_is_502(shields: Shields, model: Served) -> None:
    shield_id = shields.register("llama-guard", provider_shield_id=GUARD_MODEL)
    model.enqueue_text("Looks fine to me!")
    answer = shields.run(shield_id, "hi")
    assert answer.status_code == 502
    assert "Looks fine" not in answer.text


def test_a_guard_that_hangs_times_out_as_502(shields: Shields, model: Served) -> None:
    shield_id = shields.register("llama-guard", provider_shield_id=GUARD_MODEL, params={"timeout_seconds": 0.2})
    model.enqueue_text("safe", gate="never")
    answer = shields.run(shield_id, "hi")
    assert answer.status_code == 502
    assert "did not answer" in answer.json()["error"]["message"]


def test_run_shield_on_an_unknown_shield_is_404(shields: Shields) -> None:
    assert shields.run("no-such-shield", "hi").status_code == 404


def test_moderations_in_openai_shape_with_guard_codes_mapped(shields: Shields, model: Served) -> None:
    shield_id = shields.register("llama-guard", provider_shield_id=GUARD_MODEL)
    model.enqueue_text("safe")
    model.enqueue_text("unsafe\nS10,S7")
    answer = shields.http.post("/v1/moderations", json={"input": ["nice day", "awful words"], "model": shield_id})
    assert answer.status_code == 200
    body = answer.json()
    assert body["id"].startswith("modr-") and body["model"] == shield_id
    clean, flagged = body["results"]
    assert clean["flagged"] is False and not any(clean["categories"].values())
    assert flagged["flagged"] is True
    assert [name for name, hit in flagged["categories"].items() if hit] == ["hate"]
    assert flagged["category_scores"]["hate"] == 1.0 and flagged["category_scores"]["violence"] == 0.0
    assert flagged["metadata"]["violation_type"] == "S10,S7"
    assert set(flagged["categories"]) >= {"self-harm/intent", "sexual/minors", "illicit/violent"}


def test_moderations_with_a_model_name_uses_it_as_a_guard(http: httpx.Client, model: Served) -> None:
    model.enqueue_text("unsafe\nS11")
    body = http.post("/v1/moderations", json={"input": "sad text", "model": GUARD_MODEL}).json()
    assert body["results"][0]["categories"]["self-harm"] is True


def test_moderations_with_the_local_shield_flag_secrets(shields: Shields) -> None:
    shield_id = shields.register()
    body = shields.http.post("/v1/moderations", json={"input": f"key {AWS_KEY}", "model": shield_id}).json()
    [result] = body["results"]
    assert result["flagged"] is True and not any(result["categories"].values())
    assert result["metadata"]["kinds"] == ["aws_access_key"]


def test_moderations_naming_nothing_known_is_400(http: httpx.Client) -> None:
    answer = http.post("/v1/moderations", json={"input": "x", "model": "no-such-thing"})
    assert answer.status_code == 400
    assert answer.json()["error"]["field"] == "model"


def test_a_guard_on_a_model_that_does_not_exist_is_refused(http: httpx.Client) -> None:
    body = {"shield_id": f"bad-{uuid.uuid4().hex[:6]}", "provider_id": "llama-guard", "provider_shield_id": "nope"}
    answer = http.post("/v1/shields", json=body)
    assert answer.status_code == 400
    assert answer.json()["error"]["field"] == "provider_shield_id"


@pytest.mark.parametrize("inputs", [[], ["x"] * 65])
def test_moderations_of_no_input_or_too_many_inputs_are_400(http: httpx.Client, inputs: list[str]) -> None:
    answer = http.post("/v1/moderations", json={"input": inputs, "model": GUARD_MODEL})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["field"].startswith("input")
