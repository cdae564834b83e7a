"""Tool call arguments and tool results a shield blocked are never replayed: not in the turn, nor in later ones.

The tool input shields judge a call's arguments before the step that made the call is kept
anywhere: a blocked call's arguments are withheld in the history the model reads next, the
stored steps and the stream events. A blocked result is a note. With ``keep_blocked_text``
the raw text is kept in the blocking step's violation metadata only, and still never
replayed. Both shield kinds: the local shield, and Llama Guard played by the scripted model.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ferryman.api.agents import (
    AgentConfig,
    CreateTurnRequest,
    ShieldCallStep,
    ToolExecutionStep,
    Turn,
    TurnCompletePayload,
    TurnStreamChunk,
)
from ferryman.api.content import UserMessage
from ferryman.api.safety import ShieldResource
from ferryman.config import load_settings
from ferryman.safety_settings import SafetySettings
from ferryman.server.app import Services, build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from ferryman.withheld import KEPT_KEY, WITHHELD_ARGUMENTS
from inprocess import migrated_sqlite
from shield_standins import EchoTool

pytestmark = pytest.mark.anyio

SECRET = "alice@example.com"


@pytest.fixture(params=[False, True], ids=["default", "keep_blocked_text"])
async def kept(
    request: pytest.FixtureRequest, tmp_path: Path, scripted: ScriptedModel
) -> AsyncIterator[tuple[Services, bool]]:
    """Services whose ``safety.keep_blocked_text`` is off, then on."""
    keep = bool(request.param)
    built = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "tools.db")),
        [scripted],
        safety_settings=SafetySettings(keep_blocked_text=keep),
    )
    await built.store.open()
    await built.models.refresh()
    yield built, keep
    await built.runner.shutdown()
    await built.store.close()


def _shield(services: Services, kind: str) -> str:
    if kind == "local":
        resource = ShieldResource(identifier="local", provider_id="ferryman-local", params={"action": "block"})
    else:
        resource = ShieldResource(identifier="guard", provider_id="llama-guard", provider_resource_id="scripted-model")
    services.shields.register(services.shields.build(resource))
    return resource.identifier


async def _turn(services: Services, agent_id: str, session_id: str, text: str) -> Turn:
    request = CreateTurnRequest(messages=[UserMessage(content=text)])
    live = await services.agents.start_turn(agent_id, session_id, request)
    events = [TurnStreamChunk.model_validate(json.loads(e.data)).event.payload async for e in live.channel.read()]
    final = events[-1]
    assert isinstance(final, TurnCompletePayload)
    await live.settled.wait()
    return final.turn


def _unkept(value: Any) -> str:
    """The JSON of a turn (or stored event data) without what ``keep_blocked_text`` keeps for review."""

    def drop(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: drop(entry) for key, entry in node.items() if key != KEPT_KEY}
        return [drop(entry) for entry in node] if isinstance(node, list) else node

    return json.dumps(drop(value.model_dump(mode="json") if isinstance(value, Turn) else value))


def _verdict(turn: Turn) -> dict[str, Any]:
    [metadata] = [
        s.violation.metadata
        for s in turn.steps
        if isinstance(s, ShieldCallStep) and s.violation and s.violation.violation_level == "error"
    ]
    return metadata


@pytest.mark.parametrize("kind", ["local", "guard"])
async def test_blocked_arguments_are_withheld_everywhere_the_call_is_kept(
    kept: tuple[Services, bool], scripted: ScriptedModel, kind: str
) -> None:
    services, keep = kept
    echo = EchoTool("echoed")
    services.tools.register("test::echo", [echo])
    shield_id = _shield(services, kind)
    config = AgentConfig(
        model="scripted-model", instructions="x", toolgroups=["test::echo"], tool_input_shields=[shield_id]
    )
    agent_id = await services.agents.create_agent(config)
    session_id = await services.agents.create_session(agent_id, "s")
    call = ScriptedToolCall(name="echo", arguments={"text": f"mail {SECRET}"}, call_id="c1")
    scripted.enqueue(ScriptedReply(tool_calls=[call], chunks=3))
    if kind == "guard":
        scripted.enqueue_text("unsafe\nS7")
    scripted.enqueue_text("I could not do that")
    first = await _turn(services, agent_id, session_id, "send the mail")
    scripted.enqueue_text("ok")
    second = await _turn(services, agent_id, session_id, "and now?")

    assert echo.calls == []
    judged = 2 if kind == "guard" else 1  # the call's inference, and the guard's verdict on its arguments
    for request in scripted.requests[judged:]:
        assert SECRET not in json.dumps(request["messages"])
    answered = scripted.requests[judged]["messages"]
    assert [m["role"] for m in answered] == ["system", "user", "assistant", "tool"]
    assert answered[2]["tool_calls"][0]["arguments"] == WITHHELD_ARGUMENTS
    assert "was not run" in answered[3]["content"]
    [stored, _] = await services.store.list_turns([first.session_id])
    assert SECRET not in _unkept(stored) and SECRET not in _unkept(first)
    assert [s.step_type for s in stored.steps] == ["inference", "shield_call", "tool_execution", "inference"]
    history = await services.store.load_history(second.session_id, second.turn_id)
    assert SECRET not in json.dumps([m.model_dump(mode="json") for m in history])
    events = await services.store.turn_events_after(first.turn_id, -1)
    assert SECRET not in _unkept([json.loads(e.data) for e in events])
    if keep:
        [raw] = _verdict(stored)[KEPT_KEY]
        assert SECRET in raw["content"]
    else:
        assert KEPT_KEY not in _verdict(stored)


async def test_a_blocked_result_is_kept_for_review_only(kept: tuple[Services, bool], scripted: ScriptedModel) -> None:
    services, keep = kept
    echo = EchoTool(f"write to {SECRET}")
    services.tools.register("test::echo", [echo])
    shield_id = _shield(services, "local")
    config = AgentConfig(
        model="scripted-model", instructions="x", toolgroups=["test::echo"], tool_output_shields=[shield_id]
    )
    agent_id = await services.agents.create_agent(config)
    session_id = await services.agents.create_session(agent_id, "s")
    scripted.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="echo", arguments={"text": "x"})]))
    scripted.enqueue_text("withheld, it seems")
    first = await _turn(services, agent_id, session_id, "who do I write to?")
    scripted.enqueue_text("ok")
    await _turn(services, agent_id, session_id, "and now?")

    assert echo.calls == [{"text": "x"}]
    for request in scripted.requests:
        assert SECRET not in json.dumps(request["messages"])
    [stored, _] = await services.store.list_turns([first.session_id])
    assert SECRET not in _unkept(stored)
    tool_step = next(s for s in stored.steps if isinstance(s, ToolExecutionStep))
    assert "was withheld" in str(tool_step.tool_responses[0].content)
    if keep:
        [raw] = _verdict(stored)[KEPT_KEY]
        assert raw["role"] == "tool" and SECRET in raw["content"]
    else:
        assert KEPT_KEY not in _verdict(stored)


async def test_a_call_held_for_approval_is_judged_first(services: Services, scripted: ScriptedModel) -> None:
    """Blocked arguments are never put to an approver, nor kept to run once approved: the call is refused."""
    echo = EchoTool("echoed")
    services.tools.register("test::echo", [echo])
    shield_id = _shield(services, "local")
    config = AgentConfig(
        model="scripted-model",
        instructions="x",
        toolgroups=["test::echo"],
        tool_input_shields=[shield_id],
        require_approval="always",
    )
    agent_id = await services.agents.create_agent(config)
    session_id = await services.agents.create_session(agent_id, "s")
    scripted.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="echo", arguments={"text": SECRET})]))
    scripted.enqueue_text("I could not do that")
    turn = await _turn(services, agent_id, session_id, "send it")
    assert turn.status == "completed" and turn.approval_requests is None
    assert echo.calls == [] and SECRET not in turn.model_dump_json()
    assert "was not run" in json.dumps(scripted.requests[1]["messages"])


def test_keep_blocked_text_is_an_operator_setting_off_by_default(tmp_path: Path) -> None:
    assert load_settings(None).safety.keep_blocked_text is False
    config = tmp_path / "ferryman.yaml"
    config.write_text("safety:\n  keep_blocked_text: true\n", encoding="utf-8")
    assert load_settings(str(config)).safety.keep_blocked_text is True
