"""Upstream model failures and clients that go away mid-stream."""

from __future__ import annotations

import httpx
from integration_helpers import (
    assert_error,
    event_types,
    gate_name,
    iter_frames,
    open_gate_finally,
    post_stream,
    resume,
    run_turn,
    session_url,
    tool_response,
    turn_url,
    user,
    wait_for_requests,
)

from inprocess import Served
from support import WEATHER_TOOL, create_agent, create_session

# The server's OpenAI client makes one request and retries twice on a 5xx.
ATTEMPTS = 3


def _fail_upstream(model: Served) -> None:
    for _ in range(ATTEMPTS):
        model.enqueue_error(500, "model exploded")


def test_streamed_turn_ends_with_an_error_frame_when_the_model_fails(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    _fail_upstream(model)

    frames = post_stream(http, turn_url(agent_id, session_id), {"messages": [user("hi")]})

    assert event_types(frames)[0] == "turn_start"
    assert event_types(frames)[-1] == "error"
    assert "turn_complete" not in event_types(frames)
    turn_id = frames[0]["event"]["payload"]["turn_id"]
    error = frames[-1]["error"]
    assert error["code"] == "upstream_error"
    assert error["turn_id"] == turn_id
    assert error["message"]
    assert len(model.requests()) == ATTEMPTS

    stored = http.get(turn_url(agent_id, session_id, turn_id)).json()
    assert stored["status"] == "failed"
    assert stored["error"]["code"] == "upstream_error"
    assert stored["error"]["message"]
    assert stored["completed_at"]


def test_non_streamed_turn_is_502_when_the_model_fails(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    _fail_upstream(model)

    response = http.post(turn_url(agent_id, session_id), json={"messages": [user("hi")], "stream": False})

    error = assert_error(response, 502, "upstream_error")
    [turn] = http.get(session_url(agent_id, session_id)).json()["turns"]
    assert turn["turn_id"] in error["message"]
    assert turn["status"] == "failed"
    assert turn["error"]["code"] == "upstream_error"


def test_session_accepts_a_new_turn_after_a_failed_one(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    _fail_upstream(model)
    assert_error(http.post(turn_url(agent_id, session_id), json={"messages": [user("hi")]}), 502)

    model.enqueue_text("back online")
    turn = run_turn(http, agent_id, session_id, "again")
    assert turn["status"] == "completed"
    assert turn["output_message"]["content"] == "back online"
    turns = http.get(session_url(agent_id, session_id)).json()["turns"]
    assert [t["status"] for t in turns] == ["failed", "completed"]


def test_one_upstream_error_is_retried_transparently(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    model.enqueue_error(503, "busy")
    model.enqueue_text("made it")
    turn = run_turn(http, agent_id, session_id, "hi")
    assert turn["status"] == "completed"
    assert turn["output_message"]["content"] == "made it"
    assert len(model.requests()) == 2


def test_resumed_turn_that_fails_upstream_is_failed(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    paused = run_turn(http, agent_id, session_id, "weather?")
    [call] = paused["output_message"]["tool_calls"]
    _fail_upstream(model)

    frames = post_stream(
        http,
        f"{turn_url(agent_id, session_id, paused['turn_id'])}/resume",
        {"tool_responses": [tool_response(call, "rain")]},
    )
    assert event_types(frames)[-1] == "error"
    assert frames[-1]["error"]["turn_id"] == paused["turn_id"]
    stored = http.get(turn_url(agent_id, session_id, paused["turn_id"])).json()
    assert stored["status"] == "failed"
    # a failed turn cannot be resumed, and the session moves on
    assert_error(resume(http, agent_id, session_id, paused["turn_id"], [tool_response(call, "rain")]), 409)
    model.enqueue_text("fine")
    assert run_turn(http, agent_id, session_id, "next")["status"] == "completed"


def test_turn_finishes_after_the_client_disconnects(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    gate = gate_name()
    model.enqueue_text("finished without you", gate=gate)

    with open_gate_finally(model, gate):
        body = {"messages": [user("long question")], "stream": True}
        with http.stream("POST", turn_url(agent_id, session_id), json=body) as response:
            assert response.status_code == 200
            _, first = next(iter_frames(response))
            turn_id = first["event"]["payload"]["turn_id"]
            wait_for_requests(model, 1)
        # the stream is closed: the client is gone while the model still thinks
        assert http.get(turn_url(agent_id, session_id, turn_id)).json()["status"] == "in_progress"
        model.open_gate(gate)
        model.wait_settled()
        turn = http.get(turn_url(agent_id, session_id, turn_id)).json()

    assert turn["status"] == "completed"
    assert turn["error"] is None
    assert turn["output_message"]["content"] == "finished without you"
    assert [s["step_type"] for s in turn["steps"]] == ["inference"]

    # its answer is part of the session's history
    model.enqueue_text("next")
    run_turn(http, agent_id, session_id, "follow-up")
    roles = [(m["role"], m.get("content")) for m in model.requests()[1]["messages"]]
    assert ("assistant", "finished without you") in roles


def test_resumed_turn_finishes_after_the_client_disconnects(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    paused = run_turn(http, agent_id, session_id, "weather?")
    [call] = paused["output_message"]["tool_calls"]
    gate = gate_name()
    model.enqueue_text("rainy, stored anyway", gate=gate)

    with open_gate_finally(model, gate):
        url = f"{turn_url(agent_id, session_id, paused['turn_id'])}/resume"
        body = {"tool_responses": [tool_response(call, "rain")], "stream": True}
        with http.stream("POST", url, json=body) as response:
            assert response.status_code == 200
            next(iter_frames(response))
            wait_for_requests(model, 2)
        model.open_gate(gate)
        model.wait_settled()
        turn = http.get(turn_url(agent_id, session_id, paused["turn_id"])).json()

    assert turn["status"] == "completed"
    assert turn["output_message"]["content"] == "rainy, stored anyway"
    assert [s["step_type"] for s in turn["steps"]] == ["inference", "tool_execution", "inference"]
