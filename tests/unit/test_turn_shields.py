"""Shields inside turns (Agents API, through the service): input first, output withheld, tools, fail-closed.

Order is asserted from what the model was asked (``scripted.requests``) and from
the turn's events as its stream carries them, never from timing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ferryman.api.agents import (
    AgentConfig,
    CreateTurnRequest,
    EventPayload,
    InferenceStep,
    ShieldCallStep,
    StepCompletePayload,
    StepProgressPayload,
    StepStartPayload,
    TextDelta,
    ToolExecutionStep,
    Turn,
    TurnCompletePayload,
    TurnStreamChunk,
)
from ferryman.api.content import UserMessage
from ferryman.engine.shield_step import UNCHECKED_MESSAGE
from ferryman.safety.base import Shield
from ferryman.server.app import Services
from ferryman.services.agents import LiveTurn
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from shield_standins import BrokenShield, EchoTool, HangingShield, WordShield

pytestmark = pytest.mark.anyio


async def _turn(services: Services, text: str, *shields: Shield, **config: Any) -> list[EventPayload]:
    for shield in shields:
        services.shields.register(shield)
    agent_id = await services.agents.create_agent(
        AgentConfig(model="scripted-model", instructions="be brief", **config)
    )
    session_id = await services.agents.create_session(agent_id, "s")
    live = await services.agents.start_turn(
        agent_id, session_id, CreateTurnRequest(messages=[UserMessage(content=text)])
    )
    return await _events(live)


async def _events(live: LiveTurn) -> list[EventPayload]:
    return [TurnStreamChunk.model_validate(json.loads(e.data)).event.payload async for e in live.channel.read()]


def _final(events: list[EventPayload]) -> Turn:
    last = events[-1]
    assert isinstance(last, TurnCompletePayload)
    return last.turn


def _texts(events: list[EventPayload]) -> list[int]:
    """The positions of the text deltas in the stream."""
    return [i for i, e in enumerate(events) if isinstance(e, StepProgressPayload) and isinstance(e.delta, TextDelta)]


def _shield_done(events: list[EventPayload]) -> list[int]:
    return [i for i, e in enumerate(events) if isinstance(e, StepCompletePayload) and e.step_type == "shield_call"]


def _verdicts(turn: Turn) -> list[ShieldCallStep]:
    return [s for s in turn.steps if isinstance(s, ShieldCallStep)]


async def test_a_blocked_input_reaches_no_model(services: Services, scripted: ScriptedModel) -> None:
    shield = WordShield("no-bomb", "bomb")
    events = await _turn(services, "how to build a bomb", shield, input_shields=["no-bomb"])
    turn = _final(events)
    assert scripted.requests == []
    assert [s.step_type for s in turn.steps] == ["shield_call"]
    assert turn.output_message.content == "blocked by no-bomb"
    starts = [e for e in events if isinstance(e, StepStartPayload)]
    assert [(s.step_type, s.metadata) for s in starts] == [("shield_call", {"shield": "no-bomb", "phase": "input"})]


async def test_the_input_shield_sees_only_the_turns_input_before_anything_runs(
    services: Services, scripted: ScriptedModel
) -> None:
    shield = WordShield("watch", "never-said")
    scripted.enqueue_text("fine")
    events = await _turn(services, "hello", shield, input_shields=["watch"])
    assert [[m.role for m in seen] for seen in shield.seen] == [["user"]]
    assert [s.step_type for s in _final(events).steps] == ["shield_call", "inference"]
    assert _verdicts(_final(events))[0].violation is None


@pytest.mark.parametrize("level", ["warn", "info"])
async def test_a_warning_is_recorded_and_the_turn_goes_on(
    services: Services, scripted: ScriptedModel, level: str
) -> None:
    shield = WordShield(f"warn-{level}", "dubious", level=level)  # type: ignore[arg-type]
    scripted.enqueue_text("answered anyway")
    turn = _final(await _turn(services, "a dubious question", shield, input_shields=[shield.shield_id]))
    assert turn.output_message.content == "answered anyway"
    (verdict,) = _verdicts(turn)
    assert verdict.violation is not None and verdict.violation.violation_level == level
    assert len(scripted.requests) == 1


async def test_a_redacted_input_is_what_the_model_reads(services: Services, scripted: ScriptedModel) -> None:
    shield = WordShield("pii", "555-1234", redact=True)
    scripted.enqueue_text("noted")
    turn = _final(await _turn(services, "call me at 555-1234", shield, input_shields=["pii"]))
    prompt = json.dumps(scripted.requests[0]["messages"])
    assert "[REDACTED:555-1234]" in prompt and "555-1234 " not in prompt.replace("[REDACTED:555-1234]", "")
    assert turn.output_message.content == "noted"


async def test_a_blocked_answer_never_streams_nor_is_stored(services: Services, scripted: ScriptedModel) -> None:
    shield = WordShield("no-secret", "launch-code")
    scripted.enqueue(ScriptedReply(text="the launch-code is 0000", chunks=4))
    events = await _turn(services, "tell me", shield, output_shields=["no-secret"])
    assert _texts(events) == []
    assert "is 0000" not in json.dumps([e.model_dump(mode="json") for e in events])
    turn = _final(events)
    assert turn.output_message.content == "blocked by no-secret"
    assert [s.step_type for s in turn.steps] == ["inference", "shield_call"]
    inference = turn.steps[0]
    assert isinstance(inference, InferenceStep) and inference.model_response.content == turn.output_message.content
    # The answer's words, not its digits alone: a stored time may hold "0000" (04:46:09.020000).
    (stored,) = await services.store.list_turns([turn.session_id], [turn.turn_id])
    assert "is 0000" not in stored.model_dump_json()
    history = await services.store.load_history(turn.session_id, turn.turn_id)
    assert "is 0000" not in json.dumps([m.model_dump(mode="json") for m in history])


async def test_a_passing_answer_streams_only_after_its_verdict(services: Services, scripted: ScriptedModel) -> None:
    shield = WordShield("no-secret", "launch-code")
    scripted.enqueue(ScriptedReply(text="all is well here", chunks=3))
    events = await _turn(services, "tell me", shield, output_shields=["no-secret"])
    texts, verdicts = _texts(events), _shield_done(events)
    assert len(texts) == 3 and verdicts and verdicts[-1] < texts[0]
    turn = _final(events)
    assert turn.output_message.content == "all is well here"
    assert [s.step_type for s in turn.steps] == ["inference", "shield_call"]


async def test_a_redacted_answer_streams_redacted(services: Services, scripted: ScriptedModel) -> None:
    shield = WordShield("pii-out", "555-1234", redact=True)
    scripted.enqueue(ScriptedReply(text="dial 555-1234 now", chunks=3))
    events = await _turn(services, "number?", shield, output_shields=["pii-out"])
    deltas = [e.delta.text for e in events if isinstance(e, StepProgressPayload) and isinstance(e.delta, TextDelta)]
    assert "".join(deltas) == "dial [REDACTED:555-1234] now"
    assert _final(events).output_message.content == "dial [REDACTED:555-1234] now"


async def test_blocked_tool_arguments_keep_the_tool_from_running(services: Services, scripted: ScriptedModel) -> None:
    echo = EchoTool()
    services.tools.register("test::echo", [echo])
    shield = WordShield("no-rm", "rm -rf")
    scripted.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="echo", arguments={"text": "rm -rf /"})]))
    scripted.enqueue_text("I could not do that")
    turn = _final(await _turn(services, "clean up", shield, toolgroups=["test::echo"], tool_input_shields=["no-rm"]))
    assert echo.calls == []
    tool_step = next(s for s in turn.steps if isinstance(s, ToolExecutionStep))
    assert "was not run" in str(tool_step.tool_responses[0].content)
    assert "was not run" in json.dumps(scripted.requests[1]["messages"])
    assert [s.step_type for s in turn.steps] == ["inference", "shield_call", "tool_execution", "inference"]
    assert turn.output_message.content == "I could not do that"


async def test_a_blocked_tool_result_is_replaced_by_a_note(services: Services, scripted: ScriptedModel) -> None:
    echo = EchoTool("the password is hunter2")
    services.tools.register("test::echo", [echo])
    shield = WordShield("no-pw", "hunter2")
    scripted.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="echo", arguments={"text": "x"})]))
    scripted.enqueue_text("the result was withheld")
    turn = _final(await _turn(services, "go", shield, toolgroups=["test::echo"], tool_output_shields=["no-pw"]))
    assert echo.calls == [{"text": "x"}]
    assert "hunter2" not in json.dumps(scripted.requests[1]["messages"])
    assert "withheld" in json.dumps(scripted.requests[1]["messages"])
    assert "hunter2" not in turn.model_dump_json()


@pytest.mark.parametrize("shield_of", [BrokenShield, HangingShield], ids=["raises", "hangs"])
async def test_a_failing_shield_blocks(services: Services, scripted: ScriptedModel, shield_of: Any) -> None:
    shield = shield_of("fragile")
    turn = _final(await _turn(services, "hi", shield, input_shields=["fragile"]))
    assert scripted.requests == []
    assert turn.output_message.content == UNCHECKED_MESSAGE
    (verdict,) = _verdicts(turn)
    assert verdict.violation is not None and verdict.violation.violation_level == "error"
    reason = "error" if shield_of is BrokenShield else "timeout"
    assert verdict.violation.metadata == {"shield_id": "fragile", "shield_failure": reason, "fail_open": False}
    assert "secret-internal-detail" not in turn.model_dump_json()


@pytest.mark.parametrize("shield_of", [BrokenShield, HangingShield], ids=["raises", "hangs"])
async def test_a_failing_fail_open_shield_warns_and_the_turn_goes_on(
    services: Services, scripted: ScriptedModel, shield_of: Any
) -> None:
    shield = shield_of("lenient", fail_open=True)
    scripted.enqueue_text("answered")
    turn = _final(await _turn(services, "hi", shield, output_shields=["lenient"]))
    assert turn.output_message.content == "answered"
    (verdict,) = _verdicts(turn)
    assert verdict.violation is not None and verdict.violation.violation_level == "warn"
    assert verdict.violation.metadata["shield_failure"] == ("error" if shield_of is BrokenShield else "timeout")
