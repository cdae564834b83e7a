"""Shields inside turns, the paths around tool calls: text said beside calls, and client tools' results.

Order is asserted from the turn's events and what the model was asked, never from timing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ferryman.api.agents import (
    AgentConfig,
    CreateTurnRequest,
    EventPayload,
    ResumeTurnRequest,
    ShieldCallStep,
    StepStartPayload,
    ToolExecutionStep,
    TurnAwaitingInputPayload,
    TurnCompletePayload,
    TurnStreamChunk,
)
from ferryman.api.content import ToolDef, ToolParameter, ToolResponse, UserMessage
from ferryman.server.app import Services
from ferryman.services.agents import LiveTurn
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from shield_standins import WordShield, unique

pytestmark = pytest.mark.anyio

WEATHER = ToolDef(
    name="get_weather",
    description="weather",
    parameters=[ToolParameter(name="city", parameter_type="string", description="city")],
)


async def _session(services: Services, **config: Any) -> tuple[str, str]:
    agent_id = await services.agents.create_agent(AgentConfig(model="scripted-model", instructions="x", **config))
    return agent_id, await services.agents.create_session(agent_id, "s")


async def _events(live: LiveTurn) -> list[EventPayload]:
    return [TurnStreamChunk.model_validate(json.loads(e.data)).event.payload async for e in live.channel.read()]


def _wire(events: list[EventPayload]) -> str:
    return json.dumps([e.model_dump(mode="json") for e in events])


async def test_text_said_beside_tool_calls_is_judged_before_it_streams(
    services: Services, scripted: ScriptedModel
) -> None:
    shield = WordShield(unique("no-secret"), "launch-code")
    services.shields.register(shield)
    agent_id, session_id = await _session(services, client_tools=[WEATHER], output_shields=[shield.shield_id])
    call = ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"}, call_id="c1")
    scripted.enqueue(ScriptedReply(text="the launch-code is 0000", tool_calls=[call]))
    ask = CreateTurnRequest(messages=[UserMessage(content="hi")])
    events = await _events(await services.agents.start_turn(agent_id, session_id, ask))
    # The answer's words, not its digits alone: a time may hold "0000" (04:46:09.020000).
    assert "is 0000" not in _wire(events)
    final = events[-1]
    assert isinstance(final, TurnCompletePayload)  # blocked: no pause for the client tool
    assert final.turn.output_message.content == f"blocked by {shield.shield_id}"
    assert "is 0000" not in final.turn.model_dump_json()
    (stored,) = await services.store.list_turns([session_id], [final.turn.turn_id])
    assert "is 0000" not in stored.model_dump_json()


async def test_text_beside_tool_calls_that_passes_streams_and_the_calls_go_on(
    services: Services, scripted: ScriptedModel
) -> None:
    shield = WordShield(unique("no-secret"), "launch-code")
    services.shields.register(shield)
    agent_id, session_id = await _session(services, client_tools=[WEATHER], output_shields=[shield.shield_id])
    call = ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"}, call_id="c1")
    scripted.enqueue(ScriptedReply(text="let me look", tool_calls=[call]))
    ask = CreateTurnRequest(messages=[UserMessage(content="hi")])
    events = await _events(await services.agents.start_turn(agent_id, session_id, ask))
    assert isinstance(events[-1], TurnAwaitingInputPayload)
    assert "let me look" in _wire(events)
    assert [s.step_type for s in events[-1].turn.steps] == ["inference", "shield_call"]


async def test_a_client_tools_result_passes_the_tool_output_shields(
    services: Services, scripted: ScriptedModel
) -> None:
    shield = WordShield(unique("no-pw"), "hunter2")
    services.shields.register(shield)
    agent_id, session_id = await _session(services, client_tools=[WEATHER], tool_output_shields=[shield.shield_id])
    scripted.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id="c1")]))
    ask = CreateTurnRequest(messages=[UserMessage(content="hi")])
    paused = (await _events(await services.agents.start_turn(agent_id, session_id, ask)))[-1]
    assert isinstance(paused, TurnAwaitingInputPayload)
    scripted.enqueue_text("withheld, it seems")
    answer = ToolResponse(call_id="c1", tool_name="get_weather", content="the password is hunter2")
    resume = ResumeTurnRequest(tool_responses=[answer])
    events = await _events(await services.agents.resume_turn(agent_id, session_id, paused.turn.turn_id, resume))
    assert "hunter2" not in json.dumps(scripted.requests[-1]["messages"])
    assert "withheld" in json.dumps(scripted.requests[-1]["messages"])
    starts = [e.metadata for e in events if isinstance(e, StepStartPayload) and e.step_type == "shield_call"]
    assert starts == [{"shield": shield.shield_id, "phase": "tool_output"}]
    final = events[-1]
    assert isinstance(final, TurnCompletePayload)
    assert "hunter2" not in final.turn.model_dump_json()
    tool_step = next(s for s in final.turn.steps if isinstance(s, ToolExecutionStep))
    assert "withheld" in str(tool_step.tool_responses[0].content)
    assert any(isinstance(s, ShieldCallStep) and s.violation is not None for s in final.turn.steps)
