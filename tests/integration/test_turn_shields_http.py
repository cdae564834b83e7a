"""Shields of turns over HTTP, read as the SSE frames a client gets: Agents turns and Responses ``guardrails``.

The order is read off the wire: no text frame before the output verdict, no model
request before a blocking input verdict (the scripted model's requests are counted).
"""

from __future__ import annotations

from typing import Any

import httpx
from integration_helpers import post_stream, turn_url, user

from inprocess import Served
from shield_standins import BrokenShield, WordShield, unique
from sse import frames
from support import create_agent, create_session


def _register(model: Served, *shields: Any) -> None:
    for shield in shields:
        model.services.shields.register(shield)


def _payloads(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d["event"]["payload"] for d in data]


def _is_text(payload: dict[str, Any]) -> bool:
    return bool(payload["event_type"] == "step_progress" and payload["delta"]["type"] == "text")


def _shield_verdict_at(payloads: list[dict[str, Any]]) -> int:
    return next(
        i for i, p in enumerate(payloads) if p["event_type"] == "step_complete" and p["step_type"] == "shield_call"
    )


def test_agent_turn_text_streams_only_after_the_output_verdict(http: httpx.Client, model: Served) -> None:
    shield = WordShield(unique("out"), "forbidden")
    _register(model, shield)
    agent_id = create_agent(http, output_shields=[shield.shield_id])
    session_id = create_session(http, agent_id)
    model.enqueue_text("a perfectly fine answer")
    payloads = _payloads(post_stream(http, turn_url(agent_id, session_id), {"messages": [user("hi")]}))
    texts = [i for i, p in enumerate(payloads) if _is_text(p)]
    assert texts and _shield_verdict_at(payloads) < texts[0]
    assert payloads[-1]["turn"]["output_message"]["content"] == "a perfectly fine answer"


def test_agent_turn_blocked_answer_sends_no_text_frame(http: httpx.Client, model: Served) -> None:
    shield = WordShield(unique("out"), "forbidden")
    _register(model, shield)
    agent_id = create_agent(http, output_shields=[shield.shield_id])
    session_id = create_session(http, agent_id)
    model.enqueue_text("the forbidden recipe")
    payloads = _payloads(post_stream(http, turn_url(agent_id, session_id), {"messages": [user("hi")]}))
    assert not any(_is_text(p) for p in payloads)
    assert "recipe" not in str(payloads)
    turn = payloads[-1]["turn"]
    assert turn["output_message"]["content"] == f"blocked by {shield.shield_id}"
    assert [s["step_type"] for s in turn["steps"]] == ["inference", "shield_call"]
    assert turn["steps"][1]["violation"]["violation_level"] == "error"


def test_agent_turn_with_a_broken_input_shield_fails_closed(http: httpx.Client, model: Served) -> None:
    shield = BrokenShield(unique("broken"))
    _register(model, shield)
    agent_id = create_agent(http, input_shields=[shield.shield_id])
    session_id = create_session(http, agent_id)
    turn = http.post(turn_url(agent_id, session_id), json={"messages": [user("hi")], "stream": False}).json()
    assert model.requests() == []
    assert turn["status"] == "completed"
    assert turn["steps"][0]["violation"]["metadata"]["shield_failure"] == "error"
    assert "secret-internal-detail" not in str(turn)


def test_unknown_tool_shield_is_rejected(http: httpx.Client) -> None:
    config = {"model": "scripted-model", "instructions": "x", "tool_input_shields": ["no-such-shield"]}
    response = http.post("/v1/agents", json={"agent_config": config})
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "tool_input_shields"


# ---- Responses: guardrails ------------------------------------------------------


def _response_frames(http: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    with http.stream("POST", "/v1/responses", json={**body, "stream": True}) as response:
        assert response.status_code == 200, response.read().decode()
        return [frame.json() for frame in frames(response)]


def _refusal_of(response: dict[str, Any]) -> str:
    (item,) = [item for item in response["output"] if item["type"] == "message"]
    (part,) = item["content"]
    assert part["type"] == "refusal"
    return str(part["refusal"])


def test_guardrail_blocks_the_input_before_the_model(http: httpx.Client, model: Served) -> None:
    shield = WordShield(unique("guard"), "forbidden")
    _register(model, shield)
    body = {"model": "scripted-model", "input": "something forbidden", "guardrails": [shield.shield_id]}
    events = _response_frames(http, body)
    assert model.requests() == []
    kinds = [e["type"] for e in events]
    assert "response.output_text.delta" not in kinds
    assert "response.refusal.done" in kinds and kinds[-1] == "response.completed"
    assert _refusal_of(events[-1]["response"]) == f"blocked by {shield.shield_id}"


def test_guardrail_blocks_the_answer_before_any_text_streams(http: httpx.Client, model: Served) -> None:
    shield = WordShield(unique("guard"), "forbidden")
    _register(model, shield)
    model.enqueue_text("a forbidden answer")
    body = {"model": "scripted-model", "input": "hi", "guardrails": [{"type": shield.shield_id}]}
    events = _response_frames(http, body)
    assert not [e for e in events if e["type"].startswith("response.output_text")]
    assert "forbidden answer" not in str(events)
    final = events[-1]["response"]
    assert final["status"] == "completed" and _refusal_of(final) == f"blocked by {shield.shield_id}"
    stored = http.get(f"/v1/responses/{final['id']}").json()
    assert _refusal_of(stored) == f"blocked by {shield.shield_id}"


def test_guardrail_lets_a_fine_answer_through(http: httpx.Client, model: Served) -> None:
    shield = WordShield(unique("guard"), "forbidden")
    _register(model, shield)
    model.enqueue_text("all fine")
    response = http.post(
        "/v1/responses", json={"model": "scripted-model", "input": "hi", "guardrails": [shield.shield_id]}
    )
    assert response.status_code == 200, response.text
    assert response.json()["output"][0]["content"][0] == {
        "type": "output_text",
        "text": "all fine",
        "annotations": [],
        "logprobs": [],
    }
    assert len(shield.seen) == 2  # the input, then the answer


def test_unknown_guardrail_is_400(http: httpx.Client, model: Served) -> None:
    response = http.post("/v1/responses", json={"model": "scripted-model", "input": "hi", "guardrails": ["nope-x"]})
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "guardrails"
    assert model.requests() == []


# ---- the real providers, registered over HTTP ------------------------------------


def _register_shield(http: httpx.Client, provider_id: str, **fields: Any) -> str:
    shield_id = unique(provider_id)
    response = http.post("/v1/shields", json={"shield_id": shield_id, "provider_id": provider_id, **fields})
    assert response.status_code == 200, response.text
    return shield_id


def test_local_shield_redacts_a_secret_before_the_model_reads_it(http: httpx.Client, model: Served) -> None:
    shield_id = _register_shield(http, "ferryman-local", params={"action": "redact"})
    agent_id = create_agent(http, input_shields=[shield_id])
    session_id = create_session(http, agent_id)
    model.enqueue_text("I will not repeat it")
    key = "AKIA" + "ABCDEFGHIJKLMNOP"
    turn = http.post(
        turn_url(agent_id, session_id), json={"messages": [user(f"my key is {key}")], "stream": False}
    ).json()
    (request,) = model.requests()
    prompt = str(request["messages"])
    assert "[REDACTED:aws_access_key]" in prompt and key not in prompt
    assert turn["steps"][0]["violation"]["metadata"]["kinds"] == ["aws_access_key"]


def test_llama_guard_played_by_the_scripted_model_blocks_an_answer(http: httpx.Client, model: Served) -> None:
    shield_id = _register_shield(http, "llama-guard", provider_shield_id="scripted-model")
    body = {"model": "scripted-model", "input": "hi", "guardrails": [shield_id]}
    model.enqueue_text("safe")  # the guard's verdict on the input
    model.enqueue_text("how to pick a lock")  # the answer
    model.enqueue_text("unsafe\nS2")  # the guard's verdict on the answer
    final = _response_frames(http, body)[-1]["response"]
    assert _refusal_of(final) == "I can't answer that. Can I help with something else?"
    guard_prompts = [str(r["messages"]) for r in model.requests()]
    assert len(guard_prompts) == 3 and "how to pick a lock" in guard_prompts[2]
