"""Turns over HTTP: streaming, server and client tools, resume, history, and what reaches the model."""

from __future__ import annotations

import base64
from typing import Any

import httpx
from integration_helpers import (
    assert_valid_openai_history,
    event_types,
    last_turn,
    message_text,
    payloads,
    post_stream,
    resume,
    run_turn,
    session_url,
    tool_response,
    turn_url,
    user,
)

from ferryman.testing import ScriptedReply, ScriptedToolCall
from inprocess import Served
from support import WEATHER_TOOL, create_agent, create_session


def _tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


def _roles(request: dict[str, Any]) -> list[str]:
    return [message["role"] for message in request["messages"]]


# ---- streaming -------------------------------------------------------------


def test_streamed_turn_events_come_in_order_and_deltas_make_the_answer(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    model.enqueue(ScriptedReply(text="The answer is forty-two.", chunks=3))

    frames = post_stream(http, turn_url(agent_id, session_id), {"messages": [user("question?")]})

    assert event_types(frames) == [
        "turn_start",
        "step_start",
        "step_progress",
        "step_progress",
        "step_progress",
        "step_complete",
        "turn_complete",
    ]
    events = payloads(frames)
    turn_id = events[0]["turn_id"]
    step_id = events[1]["step_id"]
    assert events[1]["step_type"] == "inference"
    progress = [e for e in events if e["event_type"] == "step_progress"]
    assert all(e["step_id"] == step_id and e["step_type"] == "inference" for e in progress)
    assert all(e["delta"]["type"] == "text" for e in progress)
    assert "".join(e["delta"]["text"] for e in progress) == "The answer is forty-two."
    complete = events[-2]
    assert complete["step_id"] == step_id
    assert complete["step_details"]["model_response"]["content"] == "The answer is forty-two."

    turn = last_turn(frames)
    assert turn["turn_id"] == turn_id
    assert turn["session_id"] == session_id
    assert turn["status"] == "completed"
    assert turn["error"] is None
    assert turn["completed_at"]
    assert turn["output_message"]["content"] == "The answer is forty-two."
    assert turn["output_message"]["stop_reason"] == "end_of_turn"
    assert turn["input_messages"] == [{"role": "user", "content": "question?", "context": None}]
    assert [s["step_id"] for s in turn["steps"]] == [step_id]

    stored = http.get(turn_url(agent_id, session_id, turn_id)).json()
    assert stored["status"] == "completed"
    assert stored["output_message"]["content"] == "The answer is forty-two."
    assert stored["steps"] == turn["steps"]


def test_server_tool_turn_runs_calculator_between_two_inferences(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, toolgroups=["builtin::math"])
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("calculator", {"expression": "6 * 7"})
    model.enqueue_text("It is 42.")

    frames = post_stream(http, turn_url(agent_id, session_id), {"messages": [user("what is 6 times 7?")]})

    events = payloads(frames)
    steps_started = [e["step_type"] for e in events if e["event_type"] == "step_start"]
    steps_completed = [e["step_type"] for e in events if e["event_type"] == "step_complete"]
    assert steps_started == ["inference", "tool_execution", "inference"]
    assert steps_completed == ["inference", "tool_execution", "inference"]
    assert events[-1]["event_type"] == "turn_complete"

    turn = last_turn(frames)
    assert [s["step_type"] for s in turn["steps"]] == ["inference", "tool_execution", "inference"]
    tool_step = turn["steps"][1]
    call = tool_step["tool_calls"][0]
    assert call["tool_name"] == "calculator"
    assert call["arguments"] == {"expression": "6 * 7"}
    assert [r["content"] for r in tool_step["tool_responses"]] == ["42"]
    assert tool_step["tool_responses"][0]["call_id"] == call["call_id"]
    assert turn["output_message"]["content"] == "It is 42."
    assert turn["status"] == "completed"

    first, second = model.requests()
    assert "calculator" in _tool_names(first)
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert tool_messages == [{"role": "tool", "tool_call_id": call["call_id"], "content": "42"}]
    assert_valid_openai_history(second["messages"])


def test_client_tool_pauses_the_turn_awaiting_input(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("get_weather", {"city": "Paris"})

    frames = post_stream(http, turn_url(agent_id, session_id), {"messages": [user("weather in Paris?")]})

    types = event_types(frames)
    assert types[-1] == "turn_awaiting_input"
    assert "turn_complete" not in types
    events = payloads(frames)
    tool_start = [e for e in events if e["event_type"] == "step_start" and e["step_type"] == "tool_execution"]
    assert len(tool_start) == 1
    turn = last_turn(frames)
    assert turn["status"] == "awaiting_input"
    assert turn["turn_id"] == events[0]["turn_id"]
    output = turn["output_message"]
    assert output["stop_reason"] == "end_of_message"
    [call] = output["tool_calls"]
    assert call["tool_name"] == "get_weather"
    assert call["arguments"] == {"city": "Paris"}
    assert tool_start[0]["metadata"]["client_tool_call_ids"] == [call["call_id"]]

    stored = http.get(turn_url(agent_id, session_id, turn["turn_id"])).json()
    assert stored["status"] == "awaiting_input"
    assert stored["output_message"]["tool_calls"][0]["call_id"] == call["call_id"]
    assert "get_weather" in _tool_names(model.requests()[0])


def test_resume_continues_the_same_turn_with_the_client_tool_result(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    paused = last_turn(post_stream(http, turn_url(agent_id, session_id), {"messages": [user("weather?")]}))
    turn_id = paused["turn_id"]
    [call] = paused["output_message"]["tool_calls"]

    model.enqueue_text("It is sunny in Paris.")
    frames = post_stream(
        http,
        f"{turn_url(agent_id, session_id, turn_id)}/resume",
        {"tool_responses": [tool_response(call, "sunny, 21C")]},
    )

    events = payloads(frames)
    assert events[0] == {"event_type": "turn_start", "turn_id": turn_id}
    assert events[-1]["event_type"] == "turn_complete"
    turn = last_turn(frames)
    assert turn["turn_id"] == turn_id
    assert turn["status"] == "completed"
    assert turn["output_message"]["content"] == "It is sunny in Paris."
    assert [s["step_type"] for s in turn["steps"]] == ["inference", "tool_execution", "inference"]
    tool_step = turn["steps"][1]
    assert tool_step["tool_calls"][0]["call_id"] == call["call_id"]
    assert tool_step["tool_responses"] == [
        {"call_id": call["call_id"], "tool_name": "get_weather", "content": "sunny, 21C", "metadata": None}
    ]
    assert tool_step["completed_at"]

    requests = model.requests()
    assert len(requests) == 2
    tool_messages = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert tool_messages == [{"role": "tool", "tool_call_id": call["call_id"], "content": "sunny, 21C"}]
    assert_valid_openai_history(requests[1]["messages"])

    session = http.get(session_url(agent_id, session_id)).json()
    assert [t["turn_id"] for t in session["turns"]] == [turn_id]
    assert session["turns"][0]["status"] == "completed"
    assert session["turns"][0]["steps"] == turn["steps"]


def test_non_streamed_pause_and_resume(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("get_weather", {"city": "Oslo"})
    paused = run_turn(http, agent_id, session_id, "weather in Oslo?")
    assert paused["status"] == "awaiting_input"
    [call] = paused["output_message"]["tool_calls"]

    model.enqueue_text("Snow in Oslo.")
    response = resume(http, agent_id, session_id, paused["turn_id"], [tool_response(call, "snow")])
    assert response.status_code == 200, response.text
    turn = response.json()
    assert turn["turn_id"] == paused["turn_id"]
    assert turn["status"] == "completed"
    assert turn["output_message"]["content"] == "Snow in Oslo."


def test_mixed_server_and_client_calls_pause_then_keep_both_responses(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, toolgroups=["builtin::math"], client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue(
        ScriptedReply(
            tool_calls=[
                ScriptedToolCall(name="calculator", arguments={"expression": "2 + 2"}),
                ScriptedToolCall(name="get_weather", arguments={"city": "Rome"}),
            ]
        )
    )
    paused = run_turn(http, agent_id, session_id, "2+2 and weather in Rome")
    assert paused["status"] == "awaiting_input"
    calc, weather = paused["output_message"]["tool_calls"]

    # only the client call may be answered
    model.enqueue_text("4, and warm in Rome.")
    response = resume(http, agent_id, session_id, paused["turn_id"], [tool_response(weather, "warm")])
    assert response.status_code == 200, response.text
    turn = response.json()
    tool_step = turn["steps"][1]
    assert [r["call_id"] for r in tool_step["tool_responses"]] == [calc["call_id"], weather["call_id"]]
    assert [r["content"] for r in tool_step["tool_responses"]] == ["4", "warm"]
    second = model.requests()[1]
    tool_messages = [(m["tool_call_id"], m["content"]) for m in second["messages"] if m["role"] == "tool"]
    assert tool_messages == [(calc["call_id"], "4"), (weather["call_id"], "warm")]
    assert_valid_openai_history(second["messages"])


# ---- several turns -----------------------------------------------------------


def test_turns_are_listed_in_start_order(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    ids = []
    for i in range(4):
        model.enqueue_text(f"answer {i}")
        if i % 2:
            frames = post_stream(http, turn_url(agent_id, session_id), {"messages": [user(f"q{i}")]})
            ids.append(last_turn(frames)["turn_id"])
        else:
            ids.append(run_turn(http, agent_id, session_id, f"q{i}")["turn_id"])
    turns = http.get(session_url(agent_id, session_id)).json()["turns"]
    assert [t["turn_id"] for t in turns] == ids
    assert [t["output_message"]["content"] for t in turns] == [f"answer {i}" for i in range(4)]
    assert [t["input_messages"][0]["content"] for t in turns] == [f"q{i}" for i in range(4)]


def test_second_turn_sees_the_first_turns_messages(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, instructions="Remember things.")
    session_id = create_session(http, agent_id)
    model.enqueue_text("Nice to meet you, Ada.")
    run_turn(http, agent_id, session_id, "My name is Ada.")
    model.enqueue_text("Your name is Ada.")
    run_turn(http, agent_id, session_id, "What is my name?")

    second = model.requests()[1]["messages"]
    assert [(m["role"], message_text(m)) for m in second] == [
        ("system", "Remember things."),
        ("user", "My name is Ada."),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "What is my name?"),
    ]


def test_history_includes_tool_round_trips_of_earlier_turns(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("get_weather", {"city": "Lima"})
    paused = run_turn(http, agent_id, session_id, "weather in Lima?")
    [call] = paused["output_message"]["tool_calls"]
    model.enqueue_text("Foggy.")
    assert resume(http, agent_id, session_id, paused["turn_id"], [tool_response(call, "fog")]).status_code == 200
    model.enqueue_text("You're welcome.")
    run_turn(http, agent_id, session_id, "thanks")

    third = model.requests()[2]
    assert _roles(third) == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert_valid_openai_history(third["messages"])


def test_get_step_returns_each_step_of_the_turn(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, toolgroups=["builtin::math"])
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("calculator", {"expression": "1 + 1"})
    model.enqueue_text("2")
    turn = run_turn(http, agent_id, session_id, "1+1?")
    assert len(turn["steps"]) == 3
    for step in turn["steps"]:
        response = http.get(f"{turn_url(agent_id, session_id, turn['turn_id'])}/step/{step['step_id']}")
        assert response.status_code == 200, response.text
        assert response.json() == {"step": step}
        alpha = http.get(f"{turn_url(agent_id, session_id, turn['turn_id'], '/v1alpha')}/step/{step['step_id']}")
        assert alpha.json() == {"step": step}


# ---- limits and per-turn settings -------------------------------------------


def _capped_turn(http: httpx.Client, model: Served) -> tuple[str, str, dict[str, Any]]:
    """max_infer_iters=2 and a model that keeps calling the client tool: pause, resume, capped."""
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL], max_infer_iters=2)
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    paused = run_turn(http, agent_id, session_id, "weather?")
    assert paused["status"] == "awaiting_input"
    [call] = paused["output_message"]["tool_calls"]
    response = resume(http, agent_id, session_id, paused["turn_id"], [tool_response(call, "rain")])
    assert response.status_code == 200, response.text
    return agent_id, session_id, response.json()


def test_max_infer_iters_counts_inferences_across_resumes(http: httpx.Client, model: Served) -> None:
    agent_id, session_id, turn = _capped_turn(http, model)
    assert turn["status"] == "completed"
    assert turn["output_message"]["stop_reason"] == "out_of_tokens"
    steps = [s["step_type"] for s in turn["steps"]]
    assert steps == ["inference", "tool_execution", "inference", "tool_execution"]
    unrun = turn["steps"][-1]["tool_responses"][0]["content"]
    assert unrun.startswith("not executed: the turn reached max_infer_iters")
    assert len(model.requests()) == 2
    stored = http.get(turn_url(agent_id, session_id, turn["turn_id"])).json()
    assert stored["status"] == "completed"
    assert stored["output_message"]["stop_reason"] == "out_of_tokens"


def test_turn_after_a_capped_turn_sends_a_valid_history(http: httpx.Client, model: Served) -> None:
    """A turn cut by max_infer_iters ends on unanswered tool calls; the next request must still be valid."""
    agent_id, session_id, _ = _capped_turn(http, model)
    model.enqueue_text("ok")
    turn = run_turn(http, agent_id, session_id, "never mind")
    assert turn["status"] == "completed"
    assert_valid_openai_history(model.requests()[2]["messages"])


def test_max_infer_iters_one_never_pauses(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL], max_infer_iters=1)
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    turn = run_turn(http, agent_id, session_id, "weather?")
    assert turn["status"] == "completed"
    assert turn["output_message"]["stop_reason"] == "out_of_tokens"
    assert len(model.requests()) == 1


def test_per_turn_toolgroups_make_calculator_available(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("calculator", {"expression": "6 * 7"})
    model.enqueue_text("42")
    turn = run_turn(http, agent_id, session_id, "6*7?", toolgroups=["builtin::math"])
    assert [s["step_type"] for s in turn["steps"]] == ["inference", "tool_execution", "inference"]
    assert turn["steps"][1]["tool_responses"][0]["content"] == "42"
    first, second = model.requests()
    assert _tool_names(first) == ["calculator"]
    assert _tool_names(second) == ["calculator"]

    # the override belongs to that turn only
    model.enqueue_text("no tools")
    run_turn(http, agent_id, session_id, "and now?")
    assert _tool_names(model.requests()[2]) == []


def test_per_turn_toolgroups_survive_a_resume(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("get_weather", {"city": "Bern"})
    paused = run_turn(
        http, agent_id, session_id, "weather?", toolgroups=["builtin::math"], tool_config={"tool_choice": "required"}
    )
    [call] = paused["output_message"]["tool_calls"]
    model.enqueue_text("cold")
    assert resume(http, agent_id, session_id, paused["turn_id"], [tool_response(call, "cold")]).status_code == 200
    first, second = model.requests()
    assert sorted(_tool_names(first)) == ["calculator", "get_weather"]
    assert sorted(_tool_names(second)) == ["calculator", "get_weather"]
    assert first["tool_choice"] == second["tool_choice"] == "required"


def test_per_turn_tool_choice_reaches_the_model(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, toolgroups=["builtin::math"])
    session_id = create_session(http, agent_id)
    model.enqueue_text("a")
    run_turn(http, agent_id, session_id, "q1")
    model.enqueue_text("b")
    run_turn(http, agent_id, session_id, "q2", tool_config={"tool_choice": "required"})
    model.enqueue_text("c")
    run_turn(http, agent_id, session_id, "q3", tool_config={"tool_choice": "calculator"})
    model.enqueue_text("d")
    run_turn(http, agent_id, session_id, "q4", tool_config={"tool_choice": "none"})

    default, required, named, none = model.requests()
    assert default["tool_choice"] == "auto"
    assert required["tool_choice"] == "required"
    assert named["tool_choice"] == {"type": "function", "function": {"name": "calculator"}}
    assert "tools" not in none or not none["tools"]


def test_agent_tool_choice_reaches_the_model(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, toolgroups=["builtin::math"], tool_config={"tool_choice": "required"})
    session_id = create_session(http, agent_id)
    model.enqueue_text("a")
    run_turn(http, agent_id, session_id, "q")
    assert model.requests()[0]["tool_choice"] == "required"


def test_sampling_params_and_response_format_reach_the_model(http: httpx.Client, model: Served) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    agent_id = create_agent(
        http,
        sampling_params={
            "strategy": {"type": "top_p", "temperature": 0.7, "top_p": 0.9},
            "max_tokens": 64,
            "stop": ["END"],
        },
        response_format={"type": "json_schema", "json_schema": schema},
    )
    session_id = create_session(http, agent_id)
    model.enqueue_text('{"answer": "yes"}')
    run_turn(http, agent_id, session_id, "answer in JSON")
    [request] = model.requests()
    assert request["model"] == "scripted-model"
    assert request["temperature"] == 0.7
    assert request["top_p"] == 0.9
    assert request["max_tokens"] == 64
    assert request["stop"] == ["END"]
    assert request["response_format"]["type"] == "json_schema"
    assert request["response_format"]["json_schema"]["schema"] == schema
    assert request["stream"] is True


def test_instructions_become_the_system_message(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, instructions="You are a pirate. Answer like one.")
    session_id = create_session(http, agent_id)
    model.enqueue_text("Arr.")
    run_turn(http, agent_id, session_id, "hello")
    [request] = model.requests()
    assert request["messages"][0] == {"role": "system", "content": "You are a pirate. Answer like one."}
    assert _roles(request) == ["system", "user"]
    assert [m for m in request["messages"] if m["role"] == "system"] == [request["messages"][0]]


def test_documents_reach_the_model_inside_the_user_message(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    encoded = base64.b64encode(b"The vault code is 7391.").decode()
    documents = [
        {"content": "The meeting is on Tuesday.", "mime_type": "text/plain"},
        {"content": {"uri": f"data:text/plain;base64,{encoded}"}, "mime_type": "text/plain"},
        {"content": {"uri": "data:text/plain,plain%20url%20text"}, "mime_type": "text/plain"},
        {"content": [{"type": "text", "text": "Item list content."}], "mime_type": "text/markdown"},
    ]
    model.enqueue_text("Noted.")
    turn = run_turn(http, agent_id, session_id, "Summarise the documents.", documents=documents)
    assert turn["status"] == "completed"

    [request] = model.requests()
    users = [m for m in request["messages"] if m["role"] == "user"]
    assert len(users) == 1
    text = message_text(users[0])
    assert "Summarise the documents." in text
    assert "The meeting is on Tuesday." in text
    assert "The vault code is 7391." in text
    assert "plain url text" in text
    assert "Item list content." in text
    assert text.index("The meeting is on Tuesday.") < text.index("The vault code is 7391.")

    # the documents stay in the history of later turns
    model.enqueue_text("Tuesday.")
    run_turn(http, agent_id, session_id, "When is the meeting?")
    later = model.requests()[1]["messages"]
    assert "The meeting is on Tuesday." in message_text(later[1])


def test_history_keeps_each_turns_messages_together(http: httpx.Client, model: Served) -> None:
    """Turn A pauses, turn B runs meanwhile, A is resumed; turn C's history must not interleave A and B."""
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("get_weather", {"city": "Quito"})
    paused = run_turn(http, agent_id, session_id, "weather in Quito?")
    assert paused["status"] == "awaiting_input"
    [call] = paused["output_message"]["tool_calls"]

    model.enqueue_text("B answer")
    other = run_turn(http, agent_id, session_id, "unrelated question B")
    assert other["status"] == "completed"

    model.enqueue_text("Quito is mild.")
    resumed = resume(http, agent_id, session_id, paused["turn_id"], [tool_response(call, "mild")])
    assert resumed.status_code == 200, resumed.text

    model.enqueue_text("C answer")
    run_turn(http, agent_id, session_id, "question C")
    last = model.requests()[-1]["messages"]
    assert_valid_openai_history(last)


def test_a_turn_can_pause_for_client_tools_several_times(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("get_weather", {"city": "Berlin"})
    model.enqueue_tool_call("get_weather", {"city": "Madrid"})
    model.enqueue_text("Berlin is grey, Madrid is hot.")
    paused = run_turn(http, agent_id, session_id, "compare Berlin and Madrid")
    [first_call] = paused["output_message"]["tool_calls"]

    # tool results may also be content items
    answer = {**tool_response(first_call, ""), "content": [{"type": "text", "text": "grey"}]}
    again = resume(http, agent_id, session_id, paused["turn_id"], [answer])
    assert again.status_code == 200, again.text
    assert again.json()["status"] == "awaiting_input"
    [second_call] = again.json()["output_message"]["tool_calls"]
    assert second_call["arguments"] == {"city": "Madrid"}

    frames = post_stream(
        http,
        f"{turn_url(agent_id, session_id, paused['turn_id'])}/resume",
        {"tool_responses": [tool_response(second_call, "hot")]},
    )
    turn = last_turn(frames)
    assert turn["turn_id"] == paused["turn_id"]
    assert turn["status"] == "completed"
    assert [s["step_type"] for s in turn["steps"]] == [
        "inference",
        "tool_execution",
        "inference",
        "tool_execution",
        "inference",
    ]
    last = model.requests()[-1]["messages"]
    assert [(m["tool_call_id"], m["content"]) for m in last if m["role"] == "tool"] == [
        (first_call["call_id"], "grey"),
        (second_call["call_id"], "hot"),
    ]
    assert_valid_openai_history(last)


def test_length_finish_is_reported_as_out_of_tokens(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    model.enqueue(ScriptedReply(text="This answer was cut", finish="length"))
    turn = run_turn(http, agent_id, session_id, "long answer please")
    assert turn["status"] == "completed"
    assert turn["output_message"]["content"] == "This answer was cut"
    assert turn["output_message"]["stop_reason"] == "out_of_tokens"


def test_server_tool_call_with_bad_json_arguments_is_answered_with_an_error(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, toolgroups=["builtin::math"])
    session_id = create_session(http, agent_id)
    model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="calculator", arguments="{not json")]))
    model.enqueue_text("Sorry, I could not compute that.")

    frames = post_stream(http, turn_url(agent_id, session_id), {"messages": [user("compute")]})

    statuses = [
        e["delta"]["parse_status"]
        for e in payloads(frames)
        if e["event_type"] == "step_progress" and e["delta"]["type"] == "tool_call"
    ]
    assert statuses[0] == "started"
    assert statuses[-1] == "failed"
    turn = last_turn(frames)
    assert turn["status"] == "completed"
    [response] = turn["steps"][1]["tool_responses"]
    assert response["content"].startswith("error:")
    assert response["metadata"]["error"] is True and response["metadata"]["duration_ms"] >= 0
    tool_messages = [m for m in model.requests()[1]["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["content"].startswith("error:")


def test_unknown_tool_called_by_the_model_is_answered_with_an_error(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, toolgroups=["builtin::math"])
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("teleport", {"to": "Mars"})
    model.enqueue_text("I cannot teleport.")
    turn = run_turn(http, agent_id, session_id, "teleport me")
    assert turn["status"] == "completed"
    [response] = turn["steps"][1]["tool_responses"]
    assert "unknown tool 'teleport'" in response["content"]
    assert "calculator" in response["content"]
    assert turn["output_message"]["content"] == "I cannot teleport."
