"""Approval of server tool calls on the Agents API: a turn pauses, the caller decides, the same turn goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from integration_helpers import (
    assert_error,
    assert_valid_openai_history,
    payloads,
    post_stream,
    run_turn,
    tool_response,
    turn_url,
    user,
)

from ferryman.engine.approvals import approval_digest
from ferryman.testing import ScriptedReply, ScriptedServerClient, ScriptedToolCall
from inprocess import Served
from support import WEATHER_TOOL, Proc, create_agent, create_session, ferryman_server, running

ALWAYS = {"require_approval": "always"}


def _resume(http: httpx.Client, agent_id: str, session_id: str, turn_id: str, **body: Any) -> httpx.Response:
    return http.post(f"{turn_url(agent_id, session_id, turn_id)}/resume", json={"stream": False, **body})


def _paused_on_calculator(http: httpx.Client, model: Served, **config: Any) -> tuple[str, str, dict[str, Any]]:
    agent_id = create_agent(http, toolgroups=["builtin::math"], **(config or ALWAYS))
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("calculator", {"expression": "6 * 7"})
    paused = run_turn(http, agent_id, session_id, "what is 6*7?")
    return agent_id, session_id, paused


def _tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_a_call_needing_approval_pauses_the_turn_and_an_approval_runs_it(http: httpx.Client, model: Served) -> None:
    agent_id, session_id, paused = _paused_on_calculator(http, model)
    assert paused["status"] == "awaiting_input"
    [call] = paused["output_message"]["tool_calls"]
    [request] = paused["approval_requests"]
    assert request == {
        "call_id": call["call_id"],
        "tool_name": "calculator",
        "arguments": {"expression": "6 * 7"},
        "digest": approval_digest("calculator", {"expression": "6 * 7"}),
    }
    assert len(model.requests()) == 1  # nothing ran, no second inference
    # A client that comes back later reads the requests with the turn.
    stored = http.get(turn_url(agent_id, session_id, paused["turn_id"])).json()
    assert stored["approval_requests"] == [request]

    model.enqueue_text("It is 42.")
    response = _resume(
        http, agent_id, session_id, paused["turn_id"], approvals=[{"call_id": call["call_id"], "approve": True}]
    )
    assert response.status_code == 200, response.text
    turn = response.json()
    assert turn["turn_id"] == paused["turn_id"]
    assert turn["status"] == "completed"
    assert turn["approval_requests"] is None
    tool_step = next(s for s in turn["steps"] if s["step_type"] == "tool_execution")
    assert [r["content"] for r in tool_step["tool_responses"]] == ["42"]
    assert tool_step["approval_requests"] is None
    second = model.requests()[1]
    assert _tool_messages(second) == ["42"]
    assert_valid_openai_history(second["messages"])


def test_a_denied_call_is_reported_to_the_model_and_never_runs(http: httpx.Client, model: Served) -> None:
    agent_id, session_id, paused = _paused_on_calculator(http, model)
    [call] = paused["output_message"]["tool_calls"]
    model.enqueue_text("Understood, I will not calculate.")
    decision = {"call_id": call["call_id"], "approve": False, "reason": "no maths today"}
    response = _resume(http, agent_id, session_id, paused["turn_id"], approvals=[decision])
    assert response.status_code == 200, response.text
    tool_step = next(s for s in response.json()["steps"] if s["step_type"] == "tool_execution")
    [denied] = tool_step["tool_responses"]
    assert denied["content"] == "the user denied this call: no maths today"
    assert denied["metadata"] == {"denied": True}
    assert _tool_messages(model.requests()[1]) == ["the user denied this call: no maths today"]


def test_a_resume_must_decide_every_request_and_only_those(http: httpx.Client, model: Served) -> None:
    agent_id, session_id, paused = _paused_on_calculator(http, model)
    [call] = paused["output_message"]["tool_calls"]
    turn_id = paused["turn_id"]
    missing = _resume(http, agent_id, session_id, turn_id, tool_responses=[tool_response(call, "42")])
    assert_error(missing, 400)
    unknown = _resume(http, agent_id, session_id, turn_id, approvals=[{"call_id": "nope", "approve": True}])
    assert_error(unknown, 400)
    twice = [{"call_id": call["call_id"], "approve": True}] * 2
    assert_error(_resume(http, agent_id, session_id, turn_id, approvals=twice), 400)
    wrong_digest = [{"call_id": call["call_id"], "approve": True, "digest": approval_digest("calculator", {})}]
    assert_error(_resume(http, agent_id, session_id, turn_id, approvals=wrong_digest), 400)
    assert_error(_resume(http, agent_id, session_id, turn_id), 400)
    # Still paused, and still resumable.
    assert http.get(turn_url(agent_id, session_id, turn_id)).json()["status"] == "awaiting_input"
    model.enqueue_text("42.")
    right = [{"call_id": call["call_id"], "approve": True, "digest": paused["approval_requests"][0]["digest"]}]
    assert _resume(http, agent_id, session_id, turn_id, approvals=right).json()["status"] == "completed"


def test_policies_pick_tools_and_mix_with_client_calls_and_free_server_calls(http: httpx.Client, model: Served) -> None:
    """The agent's policy holds back only what it names; the toolgroup reference's policy adds to it."""
    math = {"name": "builtin::math", "require_approval": {"always": {"tool_names": ["calculator"]}}}
    agent_id = create_agent(http, toolgroups=[math], client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue(
        ScriptedReply(
            tool_calls=[
                ScriptedToolCall(name="calculator", arguments={"expression": "1 + 1"}),
                ScriptedToolCall(name="get_weather", arguments={"city": "Rome"}),
            ]
        )
    )
    paused = run_turn(http, agent_id, session_id, "1+1 and weather in Rome")
    calc, weather = paused["output_message"]["tool_calls"]
    assert [r["call_id"] for r in paused["approval_requests"]] == [calc["call_id"]]
    model.enqueue_text("2, and warm.")
    response = _resume(
        http,
        agent_id,
        session_id,
        paused["turn_id"],
        tool_responses=[tool_response(weather, "warm")],
        approvals=[{"call_id": calc["call_id"], "approve": True}],
    )
    assert response.status_code == 200, response.text
    tool_step = next(s for s in response.json()["steps"] if s["step_type"] == "tool_execution")
    assert [r["content"] for r in tool_step["tool_responses"]] == ["2", "warm"]
    assert_valid_openai_history(model.requests()[1]["messages"])


def test_never_and_unnamed_tools_run_at_once(http: httpx.Client, model: Served) -> None:
    policy = {"never": {"tool_names": ["calculator"]}}
    agent_id = create_agent(http, toolgroups=["builtin::math"], require_approval=policy)
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("calculator", {"expression": "3 + 3"})
    model.enqueue_text("6.")
    turn = run_turn(http, agent_id, session_id, "3+3?")
    assert turn["status"] == "completed"
    assert turn["approval_requests"] is None


def test_the_streamed_pause_names_the_calls_awaiting_approval(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, toolgroups=["builtin::math"], **ALWAYS)
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("calculator", {"expression": "2 ** 5"})
    frames = post_stream(http, turn_url(agent_id, session_id), {"messages": [user("2^5?")]})
    events = payloads(frames)
    started = next(e for e in events if e["event_type"] == "step_start" and e["step_type"] == "tool_execution")
    awaiting = events[-1]
    assert awaiting["event_type"] == "turn_awaiting_input"
    [request] = awaiting["turn"]["approval_requests"]
    assert started["metadata"] == {"approval_call_ids": [request["call_id"]]}
    assert request["arguments"] == {"expression": "2 ** 5"}


def test_an_approval_outlives_a_killed_server_and_the_call_runs_once(
    tmp_path: Path, scripted_proc: tuple[Proc, str], served_model: ScriptedServerClient
) -> None:
    db = tmp_path / "approvals.db"
    proc, base = ferryman_server(tmp_path, scripted_proc[1], db)
    with running(proc):
        with httpx.Client(base_url=base, timeout=30) as http:
            agent_id = create_agent(http, toolgroups=["builtin::math"], **ALWAYS)
            session_id = create_session(http, agent_id)
            served_model.enqueue_tool_call("calculator", {"expression": "20 + 22"})
            paused = run_turn(http, agent_id, session_id, "20+22?")
            [request] = paused["approval_requests"]

        proc.kill()
        proc.start()

        with httpx.Client(base_url=base, timeout=30) as http:
            assert http.get(turn_url(agent_id, session_id, paused["turn_id"])).json()["approval_requests"] == [request]
            served_model.enqueue_text("42.")
            decision = {"call_id": request["call_id"], "approve": True}
            response = _resume(http, agent_id, session_id, paused["turn_id"], approvals=[decision])
            assert response.status_code == 200, response.text
            turn = response.json()
            assert turn["status"] == "completed"
            tool_steps = [s for s in turn["steps"] if s["step_type"] == "tool_execution"]
            assert [[r["content"] for r in s["tool_responses"]] for s in tool_steps] == [["42"]]
            assert _tool_messages(served_model.requests()[1]) == ["42"]
            again = _resume(http, agent_id, session_id, paused["turn_id"], approvals=[decision])
            assert_error(again, 409)
