"""Shields of turns through the real clients: ``llama_stack_client`` 0.2.12 agents, and the ``openai`` SDK's
Responses with Llama Stack's ``guardrails`` (sent as an extra body field: the SDK has no such parameter)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from llama_stack_client import LlamaStackClient
from llama_stack_client.types.shared import SafetyViolation
from openai.types.responses import ResponseCompletedEvent, ResponseOutputMessage, ResponseOutputRefusal

from inprocess import BASE_URL, Served
from shield_standins import WordShield, unique

USER = [{"role": "user", "content": "Tell me a story"}]


@pytest.fixture()
def oai(model: Served) -> Iterator[openai.OpenAI]:
    """The ``openai`` SDK on ferryman, never retrying."""
    with openai.OpenAI(
        base_url=f"{BASE_URL}/v1", http_client=model.sdk_http_client(), api_key="unused", max_retries=0
    ) as client:
        yield client


def _shields(model: Served) -> tuple[WordShield, WordShield]:
    guard_in, guard_out = WordShield(unique("in"), "dragon"), WordShield(unique("out"), "forbidden")
    model.services.shields.register(guard_in)
    model.services.shields.register(guard_out)
    return guard_in, guard_out


def _agent_turn(client: LlamaStackClient, guard_in: WordShield, guard_out: WordShield, text: str) -> list[Any]:
    config = {
        "model": "scripted-model",
        "instructions": "Be brief.",
        "input_shields": [guard_in.shield_id],
        "output_shields": [guard_out.shield_id],
    }
    agent = client.agents.create(agent_config=config)  # type: ignore[arg-type]
    session = client.agents.session.create(agent_id=agent.agent_id, session_name="s")
    messages = [{"role": "user", "content": text}]
    stream = client.agents.turn.create(
        agent_id=agent.agent_id,
        session_id=session.session_id,
        messages=messages,  # type: ignore[arg-type]
        stream=True,
    )
    return list(stream)


def test_llama_stack_agent_shows_its_shield_steps(client: LlamaStackClient, model: Served) -> None:
    guard_in, guard_out = _shields(model)
    model.enqueue_text("once upon a time")
    chunks = _agent_turn(client, guard_in, guard_out, "a story, please")
    payloads = [chunk.event.payload for chunk in chunks]
    started = [p.metadata for p in payloads if p.event_type == "step_start" and p.step_type == "shield_call"]
    assert started == [
        {"shield": guard_in.shield_id, "phase": "input"},
        {"shield": guard_out.shield_id, "phase": "output"},
    ]
    turn = payloads[-1].turn
    assert [step.step_type for step in turn.steps] == ["shield_call", "inference", "shield_call"]
    assert turn.output_message.content == "once upon a time"


def test_llama_stack_agent_blocked_input_answers_with_the_violation(client: LlamaStackClient, model: Served) -> None:
    guard_in, guard_out = _shields(model)
    chunks = _agent_turn(client, guard_in, guard_out, "a dragon story")
    turn = chunks[-1].event.payload.turn
    assert model.requests() == []
    (step,) = turn.steps
    assert step.step_type == "shield_call" and isinstance(step.violation, SafetyViolation)
    assert step.violation.violation_level == "error"
    assert turn.output_message.content == step.violation.user_message


def test_openai_sdk_gets_a_refusal_part_for_a_blocked_input(oai: openai.OpenAI, model: Served) -> None:
    guard_in, _ = _shields(model)
    response = oai.responses.create(
        model="scripted-model", input="a dragon story", extra_body={"guardrails": [guard_in.shield_id]}
    )
    assert model.requests() == []
    assert response.status == "completed"
    item = response.output[0]
    assert isinstance(item, ResponseOutputMessage)
    part = item.content[0]
    assert isinstance(part, ResponseOutputRefusal) and part.refusal == f"blocked by {guard_in.shield_id}"
    assert response.output_text == ""


def test_openai_sdk_stream_of_a_blocked_answer_has_no_text(oai: openai.OpenAI, model: Served) -> None:
    _, guard_out = _shields(model)
    model.enqueue_text("a forbidden tale")
    events = list(
        oai.responses.create(
            model="scripted-model",
            input="a story",
            stream=True,
            extra_body={"guardrails": [{"type": guard_out.shield_id}]},
        )
    )
    kinds = [event.type for event in events]
    assert "response.output_text.delta" not in kinds
    assert kinds[-4:] == [
        "response.refusal.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = events[-1]
    assert isinstance(final, ResponseCompletedEvent)
    item = final.response.output[0]
    assert isinstance(item, ResponseOutputMessage) and isinstance(item.content[0], ResponseOutputRefusal)
