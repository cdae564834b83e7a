"""The turn loop, driven through the agent service with the scripted model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ferryman.api.agents import (
    AgentConfig,
    CreateTurnRequest,
    EventPayload,
    ResumeTurnRequest,
    SafetyViolation,
    StepCompletePayload,
    TurnAwaitingInputPayload,
    TurnCompletePayload,
    TurnStreamChunk,
)
from ferryman.api.content import Message, ToolDef, ToolParameter, ToolResponse, UserMessage, content_to_text
from ferryman.engine.events import TurnFailed
from ferryman.errors import ConflictError, FailureCode, InvalidRequestError
from ferryman.safety.base import ShieldVerdict
from ferryman.server.app import Services
from ferryman.services.agents import LiveTurn
from ferryman.storage.base import StoredEvent
from ferryman.testing import ScriptedError, ScriptedModel, ScriptedReply, ScriptedToolCall

pytestmark = pytest.mark.anyio

WEATHER = ToolDef(
    name="get_weather",
    description="weather",
    parameters=[ToolParameter(name="city", parameter_type="string", description="city")],
)


async def _agent(services: Services, **config: Any) -> tuple[str, str]:
    agent_config = AgentConfig(model="scripted-model", instructions="be brief", **config)
    agent_id = await services.agents.create_agent(agent_config)
    session_id = await services.agents.create_session(agent_id, "s")
    return agent_id, session_id


def _decode(event: StoredEvent) -> EventPayload | TurnFailed:
    """A live event's JSON back into the Agents API payload (or the failure) it carries."""
    data = json.loads(event.data)
    if "error" in data:
        error = data["error"]
        return TurnFailed(turn_id=error["turn_id"], code=FailureCode(error["code"]), message=error["message"])
    return TurnStreamChunk.model_validate(data).event.payload


async def _events(live: LiveTurn) -> list[EventPayload | TurnFailed]:
    return [_decode(event) async for event in live.channel.read()]


def _kinds(events: list[EventPayload | TurnFailed]) -> list[str]:
    return ["failed" if isinstance(e, TurnFailed) else e.event_type for e in events]


def _ask(text: str = "hi", **extra: Any) -> CreateTurnRequest:
    return CreateTurnRequest(messages=[UserMessage(content=text)], **extra)


async def test_text_turn_streams_deltas_and_completes(services: Services, scripted: ScriptedModel) -> None:
    agent_id, session_id = await _agent(services)
    scripted.enqueue(ScriptedReply(text="hello world", chunks=3))
    events = await _events(await services.agents.start_turn(agent_id, session_id, _ask()))
    kinds = _kinds(events)
    assert kinds[:2] == ["turn_start", "step_start"]
    assert kinds[-2:] == ["step_complete", "turn_complete"]
    deltas = [e.delta.text for e in events if e.event_type == "step_progress"]  # type: ignore[union-attr]
    assert "".join(deltas) == "hello world" and len(deltas) == 3
    final = events[-1]
    assert isinstance(final, TurnCompletePayload)
    assert final.turn.output_message.content == "hello world"
    assert final.turn.status == "completed"


async def test_instructions_and_history_reach_the_model(services: Services, scripted: ScriptedModel) -> None:
    agent_id, session_id = await _agent(services)
    scripted.enqueue_text("first answer")
    scripted.enqueue_text("second answer")
    await _events(await services.agents.start_turn(agent_id, session_id, _ask("one")))
    await _events(await services.agents.start_turn(agent_id, session_id, _ask("two")))
    roles = [(m["role"], m["content"]) for m in scripted.requests[1]["messages"]]
    assert roles == [
        ("system", "be brief"),
        ("user", "one"),
        ("assistant", "first answer"),
        ("user", "two"),
    ]


async def test_server_tool_runs_and_loop_continues(services: Services, scripted: ScriptedModel) -> None:
    agent_id, session_id = await _agent(services, toolgroups=["builtin::math"])
    scripted.enqueue_tool_call("calculator", {"expression": "6 * 7"})
    scripted.enqueue_text("it is 42")
    events = await _events(await services.agents.start_turn(agent_id, session_id, _ask()))
    final = events[-1]
    assert isinstance(final, TurnCompletePayload)
    types = [step.step_type for step in final.turn.steps]
    assert types == ["inference", "tool_execution", "inference"]
    tool_step = final.turn.steps[1]
    assert tool_step.step_type == "tool_execution"
    assert tool_step.tool_responses[0].content == "42"
    last_request = scripted.requests[-1]["messages"]
    assert last_request[-1] == {"role": "tool", "call_id": tool_step.tool_calls[0].call_id, "content": "42"}


async def test_client_tool_pauses_and_resume_continues_same_turn(services: Services, scripted: ScriptedModel) -> None:
    agent_id, session_id = await _agent(services, client_tools=[WEATHER])
    scripted.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"}, call_id="c1")])
    )
    events = await _events(await services.agents.start_turn(agent_id, session_id, _ask()))
    paused = events[-1]
    assert isinstance(paused, TurnAwaitingInputPayload)
    assert paused.turn.status == "awaiting_input"
    assert paused.turn.output_message.stop_reason == "end_of_message"
    turn_id = paused.turn.turn_id

    scripted.enqueue_text("sunny in Oslo")
    resume = ResumeTurnRequest(tool_responses=[ToolResponse(call_id="c1", tool_name="get_weather", content="sunny")])
    events = await _events(await services.agents.resume_turn(agent_id, session_id, turn_id, resume))
    done = events[-1]
    assert isinstance(done, TurnCompletePayload)
    assert done.turn.turn_id == turn_id
    assert [s.step_type for s in done.turn.steps] == ["inference", "tool_execution", "inference"]
    assert scripted.requests[-1]["messages"][-1]["content"] == "sunny"


async def test_resume_rejects_wrong_call_ids_and_keeps_turn_resumable(
    services: Services, scripted: ScriptedModel
) -> None:
    agent_id, session_id = await _agent(services, client_tools=[WEATHER])
    scripted.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id="c1")]))
    events = await _events(await services.agents.start_turn(agent_id, session_id, _ask()))
    turn_id = events[-1].turn.turn_id  # type: ignore[union-attr]
    wrong = ResumeTurnRequest(tool_responses=[ToolResponse(call_id="nope", tool_name="get_weather", content="x")])
    with pytest.raises(ConflictError):
        await services.agents.resume_turn(agent_id, session_id, turn_id, wrong)
    scripted.enqueue_text("ok")
    right = ResumeTurnRequest(tool_responses=[ToolResponse(call_id="c1", tool_name="get_weather", content="x")])
    events = await _events(await services.agents.resume_turn(agent_id, session_id, turn_id, right))
    assert _kinds(events)[-1] == "turn_complete"
    with pytest.raises(ConflictError):
        await services.agents.resume_turn(agent_id, session_id, turn_id, right)


async def test_mixed_server_and_client_calls_pause_once(services: Services, scripted: ScriptedModel) -> None:
    agent_id, session_id = await _agent(services, client_tools=[WEATHER], toolgroups=["builtin::math"])
    calls = [
        ScriptedToolCall(name="calculator", arguments={"expression": "1+1"}, call_id="s1"),
        ScriptedToolCall(name="get_weather", arguments={"city": "Rome"}, call_id="c1"),
    ]
    scripted.enqueue(ScriptedReply(tool_calls=calls))
    events = await _events(await services.agents.start_turn(agent_id, session_id, _ask()))
    turn_id = events[-1].turn.turn_id  # type: ignore[union-attr]
    scripted.enqueue_text("done")
    resume = ResumeTurnRequest(tool_responses=[ToolResponse(call_id="c1", tool_name="get_weather", content="warm")])
    events = await _events(await services.agents.resume_turn(agent_id, session_id, turn_id, resume))
    tool_step = next(e.step_details for e in events if isinstance(e, StepCompletePayload))
    assert tool_step.step_type == "tool_execution"
    assert [(r.call_id, r.content) for r in tool_step.tool_responses] == [("s1", "2"), ("c1", "warm")]


async def test_max_infer_iters_counts_across_resumes(services: Services, scripted: ScriptedModel) -> None:
    agent_id, session_id = await _agent(services, client_tools=[WEATHER], max_infer_iters=2)
    scripted.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id="c1")]))
    events = await _events(await services.agents.start_turn(agent_id, session_id, _ask()))
    turn_id = events[-1].turn.turn_id  # type: ignore[union-attr]
    scripted.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id="c2")]))
    resume = ResumeTurnRequest(tool_responses=[ToolResponse(call_id="c1", tool_name="get_weather", content="x")])
    events = await _events(await services.agents.resume_turn(agent_id, session_id, turn_id, resume))
    final = events[-1]
    assert isinstance(final, TurnCompletePayload)
    assert final.turn.output_message.stop_reason == "out_of_tokens"
    assert len(scripted.requests) == 2


async def test_unknown_tool_is_reported_to_the_model(services: Services, scripted: ScriptedModel) -> None:
    agent_id, session_id = await _agent(services)
    scripted.enqueue_tool_call("does_not_exist", {})
    scripted.enqueue_text("sorry")
    events = await _events(await services.agents.start_turn(agent_id, session_id, _ask()))
    assert _kinds(events)[-1] == "turn_complete"
    tool_message = scripted.requests[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and "unknown tool 'does_not_exist'" in tool_message["content"]


async def test_upstream_failure_fails_the_turn_and_frees_the_session(
    services: Services, scripted: ScriptedModel
) -> None:
    agent_id, session_id = await _agent(services)
    scripted.enqueue(ScriptedReply(error=ScriptedError(status_code=500, message="boom")))
    live = await services.agents.start_turn(agent_id, session_id, _ask())
    events = await _events(live)
    failure = events[-1]
    assert isinstance(failure, TurnFailed) and failure.code == "upstream_error"
    turn = await services.agents.get_turn(agent_id, session_id, live.turn_id)
    assert turn.status == "failed" and turn.error is not None and "boom" in turn.error.message
    scripted.enqueue_text("recovered")
    events = await _events(await services.agents.start_turn(agent_id, session_id, _ask()))
    assert _kinds(events)[-1] == "turn_complete"


async def test_second_turn_while_one_runs_is_a_conflict(services: Services, scripted: ScriptedModel) -> None:
    agent_id, session_id = await _agent(services)
    scripted.enqueue(ScriptedReply(text="slow", gate="hold"))
    live = await services.agents.start_turn(agent_id, session_id, _ask())
    with pytest.raises(ConflictError):
        await services.agents.start_turn(agent_id, session_id, _ask())
    scripted.script.open_gate("hold")
    assert _kinds(await _events(live))[-1] == "turn_complete"


async def test_failed_turns_are_left_out_of_later_history(services: Services, scripted: ScriptedModel) -> None:
    agent_id, session_id = await _agent(services)
    scripted.enqueue(ScriptedReply(error=ScriptedError()))
    await _events(await services.agents.start_turn(agent_id, session_id, _ask("lost")))
    scripted.enqueue_text("ok")
    await _events(await services.agents.start_turn(agent_id, session_id, _ask("kept")))
    contents = [m["content"] for m in scripted.requests[-1]["messages"]]
    assert "lost" not in contents and "kept" in contents


class _BlockWord:
    shield_id = "block-word"
    fail_open = False
    timeout_seconds = 10.0

    async def run(self, messages: list[Message], params: dict[str, Any]) -> ShieldVerdict:
        if any("forbidden" in content_to_text(m.content) for m in messages):
            return ShieldVerdict(SafetyViolation(violation_level="error", user_message="blocked by policy"))
        return ShieldVerdict(None)


async def test_input_shield_violation_ends_turn_without_inference(services: Services, scripted: ScriptedModel) -> None:
    services.shields.register(_BlockWord())
    agent_id, session_id = await _agent(services, input_shields=["block-word"])
    events = await _events(await services.agents.start_turn(agent_id, session_id, _ask("forbidden words")))
    final = events[-1]
    assert isinstance(final, TurnCompletePayload)
    assert [s.step_type for s in final.turn.steps] == ["shield_call"]
    assert final.turn.output_message.content == "blocked by policy"
    assert scripted.requests == []


async def test_unknown_shield_or_toolgroup_is_rejected_at_agent_creation(services: Services) -> None:
    with pytest.raises(InvalidRequestError, match="unknown shield"):
        await _agent(services, input_shields=["nope"])
    with pytest.raises(InvalidRequestError, match="unknown toolgroup"):
        await _agent(services, toolgroups=["builtin::nope"])


async def test_sampling_and_tool_choice_reach_the_model(services: Services, scripted: ScriptedModel) -> None:
    agent_id, session_id = await _agent(
        services,
        toolgroups=["builtin::math"],
        sampling_params={"strategy": {"type": "top_p", "temperature": 0.7, "top_p": 0.9}, "max_tokens": 64},
        tool_config={"tool_choice": "required"},
    )
    scripted.enqueue_text("fine")
    await _events(await services.agents.start_turn(agent_id, session_id, _ask()))
    request = scripted.requests[0]
    assert (request["temperature"], request["top_p"], request["max_tokens"]) == (0.7, 0.9, 64)
    assert request["tool_choice"] == "required" and request["tools"] == ["calculator"]
