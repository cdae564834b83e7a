"""Errors over HTTP: unknown resources, invalid bodies, conflicts; never a 500."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from integration_helpers import (
    assert_error,
    gate_name,
    iter_frames,
    open_gate_finally,
    payloads,
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


def _paused_turn(http: httpx.Client, model: Served) -> tuple[str, str, dict[str, Any]]:
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    paused = run_turn(http, agent_id, session_id, "weather?")
    assert paused["status"] == "awaiting_input"
    return agent_id, session_id, paused


# ---- unknown resources -------------------------------------------------------


def test_unknown_agent_is_404_everywhere(http: httpx.Client) -> None:
    missing = "agent-that-does-not-exist"
    error = assert_error(http.get(f"/v1/agents/{missing}"), 404, "not_found")
    assert missing in error["message"]
    assert_error(http.get(f"/v1alpha/agents/{missing}"), 404, "not_found")
    assert_error(http.delete(f"/v1/agents/{missing}"), 404, "not_found")
    assert_error(http.post(f"/v1/agents/{missing}/session", json={"session_name": "x"}), 404, "not_found")
    assert_error(http.get(f"/v1/agents/{missing}/sessions"), 404, "not_found")
    assert_error(http.get(session_url(missing, "s")), 404, "not_found")
    body = {"messages": [user("hi")], "stream": False}
    assert_error(http.post(turn_url(missing, "s"), json=body), 404, "not_found")
    assert_error(http.post(turn_url(missing, "s"), json={**body, "stream": True}), 404, "not_found")


def test_unknown_session_turn_and_step_are_404(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    error = assert_error(http.get(session_url(agent_id, "no-session")), 404, "not_found")
    assert "no-session" in error["message"]
    assert_error(http.delete(session_url(agent_id, "no-session")), 404, "not_found")
    body = {"messages": [user("hi")], "stream": False}
    assert_error(http.post(turn_url(agent_id, "no-session"), json=body), 404, "not_found")

    error = assert_error(http.get(turn_url(agent_id, session_id, "no-turn")), 404, "not_found")
    assert "no-turn" in error["message"]
    responses = [{"call_id": "c", "tool_name": "t", "content": "x"}]
    assert_error(resume(http, agent_id, session_id, "no-turn", responses), 404, "not_found")

    model.enqueue_text("hello")
    turn = run_turn(http, agent_id, session_id, "hi")
    error = assert_error(http.get(f"{turn_url(agent_id, session_id, turn['turn_id'])}/step/no-step"), 404, "not_found")
    assert "no-step" in error["message"]
    assert_error(http.get(f"{turn_url(agent_id, session_id, 'no-turn')}/step/no-step"), 404, "not_found")


def test_turn_of_another_session_is_404(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    other_session = create_session(http, agent_id)
    model.enqueue_text("hello")
    turn = run_turn(http, agent_id, session_id, "hi")
    assert_error(http.get(turn_url(agent_id, other_session, turn["turn_id"])), 404, "not_found")
    step_id = turn["steps"][0]["step_id"]
    assert_error(http.get(f"{turn_url(agent_id, other_session, turn['turn_id'])}/step/{step_id}"), 404, "not_found")


def test_unknown_route_and_wrong_method_answer_json(http: httpx.Client) -> None:
    assert_error(http.get("/v1/no-such-route"), 404)
    assert_error(http.put("/v1/agents"), 405)


# ---- invalid bodies ------------------------------------------------------------


def test_agent_without_model_is_400_naming_the_field(http: httpx.Client) -> None:
    response = http.post("/v1/agents", json={"agent_config": {"instructions": "x"}})
    error = assert_error(response, 400, "invalid_request")
    assert error["field"] == "agent_config.model"
    assert "agent_config.model" in error["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "agent_config"),
        ({"agent_config": {"model": "", "instructions": "x"}}, "agent_config.model"),
        ({"agent_config": {"model": "scripted-model"}}, "agent_config.instructions"),
        ({"agent_config": {"model": "scripted-model", "instructions": "x", "max_infer_iters": 0}}, "max_infer_iters"),
        (
            {
                "agent_config": {
                    "model": "scripted-model",
                    "instructions": "x",
                    "sampling_params": {"strategy": {"type": "top_p", "top_p": 2}},
                }
            },
            "sampling_params",
        ),
    ],
)
def test_invalid_agent_configs_are_400(http: httpx.Client, body: dict[str, Any], field: str) -> None:
    error = assert_error(http.post("/v1/agents", json=body), 400, "invalid_request")
    assert field in error["field"]


def test_conflicting_tool_choice_is_400(http: httpx.Client) -> None:
    config = {
        "model": "scripted-model",
        "instructions": "x",
        "tool_choice": "required",
        "tool_config": {"tool_choice": "auto"},
    }
    error = assert_error(http.post("/v1/agents", json={"agent_config": config}), 400, "invalid_request")
    assert "tool_choice" in error["message"]


def test_body_that_is_not_json_is_400(http: httpx.Client) -> None:
    response = http.post("/v1/agents", content=b"{not json", headers={"content-type": "application/json"})
    assert_error(response, 400, "invalid_request")


def test_session_without_name_is_400(http: httpx.Client) -> None:
    agent_id = create_agent(http)
    error = assert_error(http.post(f"/v1/agents/{agent_id}/session", json={}), 400, "invalid_request")
    assert error["field"] == "session_name"


def test_turn_with_no_messages_is_400(http: httpx.Client) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    for stream in (False, True):
        response = http.post(turn_url(agent_id, session_id), json={"messages": [], "stream": stream})
        assert assert_error(response, 400, "invalid_request")["field"] == "messages"
    response = http.post(turn_url(agent_id, session_id), json={"stream": False})
    assert assert_error(response, 400, "invalid_request")["field"] == "messages"
    assert http.get(session_url(agent_id, session_id)).json()["turns"] == []


def test_turn_with_bad_role_is_400(http: httpx.Client) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    for role in ("robot", "assistant", "system"):
        body = {"messages": [{"role": role, "content": "hi"}], "stream": False}
        error = assert_error(http.post(turn_url(agent_id, session_id), json=body), 400, "invalid_request")
        assert error["field"].startswith("messages.0"), error
    assert http.get(session_url(agent_id, session_id)).json()["turns"] == []


def test_resume_with_no_tool_responses_is_400(http: httpx.Client, model: Served) -> None:
    agent_id, session_id, paused = _paused_turn(http, model)
    error = assert_error(resume(http, agent_id, session_id, paused["turn_id"], []), 400, "invalid_request")
    assert error["field"] == "tool_responses"


# ---- unknown models, toolgroups, shields ----------------------------------------


def test_unknown_model_at_agent_creation_is_400(http: httpx.Client) -> None:
    config = {"model": "no-such-model", "instructions": "x"}
    error = assert_error(http.post("/v1/agents", json={"agent_config": config}), 400, "invalid_request")
    assert error["field"] == "agent_config.model"
    assert "no-such-model" in error["message"]


def test_unknown_toolgroup_at_agent_creation_is_400(http: httpx.Client) -> None:
    config = {"model": "scripted-model", "instructions": "x", "toolgroups": ["builtin::nope"]}
    error = assert_error(http.post("/v1/agents", json={"agent_config": config}), 400, "invalid_request")
    assert error["field"] == "toolgroups"
    assert "builtin::nope" in error["message"]


def test_unknown_toolgroup_in_a_turn_is_400(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    body = {"messages": [user("hi")], "toolgroups": ["builtin::nope"], "stream": False}
    error = assert_error(http.post(turn_url(agent_id, session_id), json=body), 400, "invalid_request")
    assert "builtin::nope" in error["message"]
    assert_error(http.post(turn_url(agent_id, session_id), json={**body, "stream": True}), 400, "invalid_request")
    assert http.get(session_url(agent_id, session_id)).json()["turns"] == []
    assert model.requests() == []


def test_unknown_shield_is_400(http: httpx.Client) -> None:
    config = {"model": "scripted-model", "instructions": "x", "input_shields": ["no-shield"]}
    error = assert_error(http.post("/v1/agents", json={"agent_config": config}), 400, "invalid_request")
    assert error["field"] == "input_shields"


def test_tool_both_client_and_server_is_400(http: httpx.Client) -> None:
    calculator = {"name": "calculator", "description": "clash", "parameters": []}
    config = {
        "model": "scripted-model",
        "instructions": "x",
        "toolgroups": ["builtin::math"],
        "client_tools": [calculator],
    }
    error = assert_error(http.post("/v1/agents", json={"agent_config": config}), 400, "invalid_request")
    assert error["field"] == "client_tools"


# ---- conflicts ------------------------------------------------------------------


def test_resume_of_a_completed_turn_is_409(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue_text("no tools needed")
    turn = run_turn(http, agent_id, session_id, "hi")
    assert turn["status"] == "completed"
    responses = [{"call_id": "call_x", "tool_name": "get_weather", "content": "x"}]
    error = assert_error(resume(http, agent_id, session_id, turn["turn_id"], responses), 409, "conflict")
    assert turn["turn_id"] in error["message"]
    assert_error(resume(http, agent_id, session_id, turn["turn_id"], responses, stream=True), 409, "conflict")


def test_resume_twice_is_409(http: httpx.Client, model: Served) -> None:
    agent_id, session_id, paused = _paused_turn(http, model)
    [call] = paused["output_message"]["tool_calls"]
    model.enqueue_text("done")
    assert resume(http, agent_id, session_id, paused["turn_id"], [tool_response(call, "ok")]).status_code == 200
    assert_error(resume(http, agent_id, session_id, paused["turn_id"], [tool_response(call, "ok")]), 409, "conflict")
    assert len(model.requests()) == 2


def test_resume_with_wrong_call_ids_is_409_and_the_turn_stays_resumable(http: httpx.Client, model: Served) -> None:
    agent_id, session_id, paused = _paused_turn(http, model)
    turn_id = paused["turn_id"]
    [call] = paused["output_message"]["tool_calls"]

    wrong = {"call_id": "not-the-call", "tool_name": "get_weather", "content": "x"}
    error = assert_error(resume(http, agent_id, session_id, turn_id, [wrong]), 409, "conflict")
    assert call["call_id"] in error["message"]
    # too many answers, or the same one twice, are wrong as well
    assert_error(resume(http, agent_id, session_id, turn_id, [tool_response(call, "a"), wrong]), 409, "conflict")
    twice = [tool_response(call, "a"), tool_response(call, "b")]
    assert_error(resume(http, agent_id, session_id, turn_id, twice), 409, "conflict")
    assert_error(resume(http, agent_id, session_id, turn_id, [wrong], stream=True), 409, "conflict")

    assert http.get(turn_url(agent_id, session_id, turn_id)).json()["status"] == "awaiting_input"
    assert len(model.requests()) == 1

    model.enqueue_text("Sunny.")
    response = resume(http, agent_id, session_id, turn_id, [tool_response(call, "sun")])
    assert response.status_code == 200, response.text
    turn = response.json()
    assert turn["status"] == "completed"
    assert turn["steps"][1]["tool_responses"][0]["content"] == "sun"


def test_second_turn_while_one_runs_is_409(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    other_session = create_session(http, agent_id)
    gate = gate_name()
    model.enqueue_text("first finished", gate=gate)
    body = {"messages": [user("first")], "stream": True}
    with open_gate_finally(model, gate), http.stream("POST", turn_url(agent_id, session_id), json=body) as response:
        assert response.status_code == 200
        frames = iter_frames(response)
        _, first = next(frames)
        turn_id = first["event"]["payload"]["turn_id"]
        wait_for_requests(model, 1)

        running = http.get(turn_url(agent_id, session_id, turn_id)).json()
        assert running["status"] == "in_progress"
        assert running["completed_at"] is None

        second = {"messages": [user("second")], "stream": False}
        error = assert_error(http.post(turn_url(agent_id, session_id), json=second), 409, "conflict")
        assert session_id in error["message"]
        assert_error(http.post(turn_url(agent_id, session_id), json={**second, "stream": True}), 409, "conflict")

        # another session of the same agent is not blocked
        model.enqueue_text("other session")
        assert run_turn(http, agent_id, other_session, "meanwhile")["status"] == "completed"

        model.open_gate(gate)
        rest = [data for _, data in frames]
    assert payloads(rest)[-1]["event_type"] == "turn_complete"
    assert payloads(rest)[-1]["turn"]["output_message"]["content"] == "first finished"

    turns = http.get(session_url(agent_id, session_id)).json()["turns"]
    assert [t["turn_id"] for t in turns] == [turn_id]
    model.enqueue_text("second finished")
    assert run_turn(http, agent_id, session_id, "second")["status"] == "completed"


def test_resume_while_another_turn_runs_is_409(http: httpx.Client, model: Served) -> None:
    agent_id, session_id, paused = _paused_turn(http, model)
    [call] = paused["output_message"]["tool_calls"]
    gate = gate_name()
    model.enqueue_text("running turn done", gate=gate)
    body = {"messages": [user("another")], "stream": True}
    with open_gate_finally(model, gate), http.stream("POST", turn_url(agent_id, session_id), json=body) as response:
        frames = iter_frames(response)
        next(frames)
        wait_for_requests(model, 2)
        error = assert_error(
            resume(http, agent_id, session_id, paused["turn_id"], [tool_response(call, "x")]), 409, "conflict"
        )
        assert session_id in error["message"]
        model.open_gate(gate)
        assert payloads([data for _, data in frames])[-1]["event_type"] == "turn_complete"

    assert http.get(turn_url(agent_id, session_id, paused["turn_id"])).json()["status"] == "awaiting_input"
    model.enqueue_text("resumed fine")
    response = resume(http, agent_id, session_id, paused["turn_id"], [tool_response(call, "x")])
    assert response.status_code == 200, response.text
    assert response.json()["output_message"]["content"] == "resumed fine"


def test_grammar_response_format_is_a_client_error_not_a_500(http: httpx.Client, model: Served) -> None:
    """The OpenAI-compatible provider cannot do grammars: say so with a 400, at creation or at the turn."""
    config = {
        "model": "scripted-model",
        "instructions": "x",
        "response_format": {"type": "grammar", "bnf": {"root": "'yes' | 'no'"}},
    }
    created = http.post("/v1/agents", json={"agent_config": config})
    if created.status_code == 400:
        assert "response_format" in created.json()["error"].get("field", "")
        return
    assert created.status_code == 200, created.text
    agent_id = created.json()["agent_id"]
    session_id = create_session(http, agent_id)
    response = http.post(turn_url(agent_id, session_id), json={"messages": [user("yes or no?")], "stream": False})
    assert_error(response, 400, "invalid_request")


@pytest.mark.parametrize(
    "document",
    [
        {"content": {"uri": "ftp://example.invalid/doc.txt"}, "mime_type": "text/plain"},
        {"content": {"uri": "data:text/plain;base64,!!!not-base64"}, "mime_type": "text/plain"},
        {"content": {"uri": "http://127.0.0.1:1/unreachable.txt"}, "mime_type": "text/plain"},
    ],
)
def test_unusable_documents_are_400(http: httpx.Client, model: Served, document: dict[str, Any]) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    body = {"messages": [user("read this")], "documents": [document], "stream": False}
    error = assert_error(http.post(turn_url(agent_id, session_id), json=body), 400, "invalid_request")
    assert error["field"] == "documents"
    assert http.get(session_url(agent_id, session_id)).json()["turns"] == []
    assert model.requests() == []


def test_deleting_a_session_while_its_turn_runs_ends_the_turn_cleanly(http: httpx.Client, model: Served) -> None:
    """Either the delete is refused (409) or the live stream ends with a deliberate error, not an internal one."""
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    gate = gate_name()
    model.enqueue_text("too late", gate=gate)
    body = {"messages": [user("question")], "stream": True}
    with open_gate_finally(model, gate), http.stream("POST", turn_url(agent_id, session_id), json=body) as response:
        frames = iter_frames(response)
        next(frames)
        wait_for_requests(model, 1)
        deleted = http.delete(session_url(agent_id, session_id))
        model.open_gate(gate)
        rest = [data for _, data in frames]
    if deleted.status_code == 409:
        assert payloads(rest)[-1]["event_type"] == "turn_complete"
        return
    assert deleted.status_code == 200, deleted.text
    assert "error" in rest[-1], rest[-1]
    assert rest[-1]["error"]["code"] != "internal_error", rest[-1]
    assert_error(http.get(session_url(agent_id, session_id)), 404, "not_found")
