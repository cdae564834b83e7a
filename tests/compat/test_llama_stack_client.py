"""The low-level ``llama_stack_client`` 0.2.12 resources against a running ferryman server.

Every test drives the real client library exactly as a user would; the scripted
model answers. ``conftest.py`` gives a client that does not retry.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import llama_stack_client
import pytest
from compat_support import Conversation
from llama_stack_client import LlamaStackClient
from llama_stack_client.types.agents import AgentTurnResponseStreamChunk, Turn

from ferryman.testing import ScriptedReply, ScriptedToolCall
from inprocess import BASE_URL, Served

USER = [{"role": "user", "content": "What is the weather in Paris?"}]


def stream_turn(client: LlamaStackClient, chat: Conversation) -> list[AgentTurnResponseStreamChunk]:
    """Start a streamed turn and read it to the end."""
    stream = client.agents.turn.create(agent_id=chat.agent_id, session_id=chat.session_id, messages=USER, stream=True)
    return list(stream)


def create_turn(client: LlamaStackClient, chat: Conversation) -> Turn:
    """Run a non-streamed turn."""
    return client.agents.turn.create(agent_id=chat.agent_id, session_id=chat.session_id, messages=USER, stream=False)


def event_types(chunks: Iterable[AgentTurnResponseStreamChunk]) -> list[str]:
    """The ``event_type`` of each chunk's payload."""
    return [chunk.event.payload.event_type for chunk in chunks]


def pause_on_weather(client: LlamaStackClient, chat: Conversation, model: Served) -> Turn:
    """Run a turn in which the model calls ``get_weather``; return the paused turn."""
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    last = stream_turn(client, chat)[-1].event.payload
    assert last.event_type == "turn_awaiting_input"
    return last.turn


def weather_response(turn: Turn, content: str = "sunny, 21C") -> list[dict[str, Any]]:
    """The client's answer to the paused turn's only tool call."""
    call = turn.output_message.tool_calls[0]
    return [{"call_id": call.call_id, "tool_name": call.tool_name, "content": content}]


# ---- agents and sessions ---------------------------------------------------


def test_create_agent_and_session_return_ids(client: LlamaStackClient) -> None:
    """``agents.create`` and ``agents.session.create`` parse into their response types."""
    agent = client.agents.create(agent_config={"model": "scripted-model", "instructions": "Be brief."})
    session = client.agents.session.create(agent_id=agent.agent_id, session_name="first")
    assert agent.agent_id
    assert session.session_id


def test_session_retrieve_returns_name_and_turns(client: LlamaStackClient, chat: Conversation, model: Served) -> None:
    """``agents.session.retrieve`` returns the session with its turns, parsed as ``Turn``."""
    model.enqueue_text("Sunny.")
    turn = create_turn(client, chat)
    session = client.agents.session.retrieve(agent_id=chat.agent_id, session_id=chat.session_id)
    assert session.session_id == chat.session_id
    assert session.session_name == "compat"
    assert [t.turn_id for t in session.turns] == [turn.turn_id]
    assert session.turns[0].output_message.content == "Sunny."


def test_session_retrieve_filters_by_turn_ids(client: LlamaStackClient, chat: Conversation, model: Served) -> None:
    """``turn_ids=[...]`` (sent comma-separated by the client) keeps only the named turns."""
    model.enqueue_text("one")
    model.enqueue_text("two")
    model.enqueue_text("three")
    first, _, third = (create_turn(client, chat) for _ in range(3))
    session = client.agents.session.retrieve(
        agent_id=chat.agent_id, session_id=chat.session_id, turn_ids=[first.turn_id, third.turn_id]
    )
    assert [t.turn_id for t in session.turns] == [first.turn_id, third.turn_id]


def test_session_delete_makes_it_not_found(client: LlamaStackClient, chat: Conversation) -> None:
    """``agents.session.delete`` succeeds; retrieving the session afterwards is a ``NotFoundError``."""
    assert client.agents.session.delete(agent_id=chat.agent_id, session_id=chat.session_id) is None
    with pytest.raises(llama_stack_client.NotFoundError):
        client.agents.session.retrieve(agent_id=chat.agent_id, session_id=chat.session_id)


def test_agent_delete_makes_it_not_found(client: LlamaStackClient, chat: Conversation) -> None:
    """``agents.delete`` succeeds; its sessions and the agent itself are gone afterwards."""
    assert client.agents.delete(agent_id=chat.agent_id) is None
    with pytest.raises(llama_stack_client.NotFoundError):
        client.agents.session.retrieve(agent_id=chat.agent_id, session_id=chat.session_id)
    with pytest.raises(llama_stack_client.NotFoundError):
        client.agents.session.create(agent_id=chat.agent_id, session_name="again")


# ---- turns -----------------------------------------------------------------


def test_streamed_turn_event_order(client: LlamaStackClient, chat: Conversation, model: Served) -> None:
    """A streamed text turn is turn_start, step_start, step_progress..., step_complete, turn_complete."""
    model.enqueue_text("It is sunny in Paris.")
    types = event_types(stream_turn(client, chat))
    progress = types.count("step_progress")
    assert progress >= 1
    assert types == ["turn_start", "step_start", *["step_progress"] * progress, "step_complete", "turn_complete"]


def test_streamed_turn_text_deltas_add_up_to_the_answer(
    client: LlamaStackClient, chat: Conversation, model: Served
) -> None:
    """The text deltas of the inference step concatenate to the final output message."""
    model.enqueue_text("It is sunny in Paris.")
    chunks = stream_turn(client, chat)
    deltas = [c.event.payload.delta for c in chunks if c.event.payload.event_type == "step_progress"]
    assert all(delta.type == "text" for delta in deltas)
    assert "".join(delta.text for delta in deltas) == "It is sunny in Paris."
    assert chunks[-1].event.payload.turn.output_message.content == "It is sunny in Paris."


def test_streamed_turn_ids_are_consistent(client: LlamaStackClient, chat: Conversation, model: Served) -> None:
    """turn_start names the final turn; every step event names the one inference step of it."""
    model.enqueue_text("Sunny.")
    chunks = stream_turn(client, chat)
    start, *step_events, complete = (c.event.payload for c in chunks)
    turn = complete.turn
    assert start.turn_id == turn.turn_id
    assert {e.step_id for e in step_events} == {turn.steps[0].step_id}
    assert {e.step_type for e in step_events} == {"inference"}
    assert step_events[-1].step_details.turn_id == turn.turn_id


def test_non_streamed_turn_returns_a_turn(client: LlamaStackClient, chat: Conversation, model: Served) -> None:
    """``turn.create(stream=False)`` returns a ``Turn`` with the answer and its inference step."""
    model.enqueue_text("Sunny.")
    turn = create_turn(client, chat)
    assert isinstance(turn, Turn)
    assert turn.session_id == chat.session_id
    assert turn.input_messages[0].content == USER[0]["content"]
    assert turn.output_message.content == "Sunny."
    assert turn.output_message.stop_reason == "end_of_turn"
    assert [s.step_type for s in turn.steps] == ["inference"]
    assert turn.steps[0].api_model_response.content == "Sunny."
    assert turn.completed_at is not None


def test_turn_retrieve_matches_the_created_turn(client: LlamaStackClient, chat: Conversation, model: Served) -> None:
    """``turn.retrieve`` returns the same turn ``turn.create`` returned."""
    model.enqueue_text("Sunny.")
    created = create_turn(client, chat)
    fetched = client.agents.turn.retrieve(agent_id=chat.agent_id, session_id=chat.session_id, turn_id=created.turn_id)
    assert fetched.to_dict() == created.to_dict()


def test_steps_retrieve_returns_the_step(client: LlamaStackClient, chat: Conversation, model: Served) -> None:
    """``steps.retrieve`` returns ``{"step": ...}`` parsed as the inference step of the turn."""
    model.enqueue_text("Sunny.")
    turn = create_turn(client, chat)
    step_id = turn.steps[0].step_id
    response = client.agents.steps.retrieve(
        agent_id=chat.agent_id, session_id=chat.session_id, turn_id=turn.turn_id, step_id=step_id
    )
    assert response.step.step_type == "inference"
    assert response.step.step_id == step_id
    assert response.step.api_model_response.content == "Sunny."


# ---- client tools: pause and resume ----------------------------------------


def test_client_tool_call_pauses_the_turn(client: LlamaStackClient, weather_chat: Conversation, model: Served) -> None:
    """A call of a client tool ends the stream with turn_awaiting_input carrying the call."""
    turn = pause_on_weather(client, weather_chat, model)
    message = turn.output_message
    assert message.stop_reason == "end_of_message"
    assert [(c.tool_name, c.arguments) for c in message.tool_calls] == [("get_weather", {"city": "Paris"})]


def test_streamed_resume_completes_the_same_turn(
    client: LlamaStackClient, weather_chat: Conversation, model: Served
) -> None:
    """``turn.resume(stream=True)`` streams the tool step and the answer, ending in turn_complete of the same turn."""
    paused = pause_on_weather(client, weather_chat, model)
    model.enqueue_text("Sunny in Paris.")
    chunks = list(
        client.agents.turn.resume(
            agent_id=weather_chat.agent_id,
            session_id=weather_chat.session_id,
            turn_id=paused.turn_id,
            tool_responses=weather_response(paused),
            stream=True,
        )
    )
    final = chunks[-1].event.payload
    assert final.event_type == "turn_complete"
    assert final.turn.turn_id == paused.turn_id
    assert final.turn.output_message.content == "Sunny in Paris."
    completed = [c.event.payload for c in chunks if c.event.payload.event_type == "step_complete"]
    assert [s.step_type for s in completed] == ["tool_execution", "inference"]
    assert completed[0].step_details.tool_responses[0].content == "sunny, 21C"


def test_non_streamed_resume_returns_the_completed_turn(
    client: LlamaStackClient, weather_chat: Conversation, model: Served
) -> None:
    """``turn.resume(stream=False)`` returns the whole turn: inference, tool_execution, inference."""
    paused = pause_on_weather(client, weather_chat, model)
    model.enqueue_text("Sunny in Paris.")
    turn = client.agents.turn.resume(
        agent_id=weather_chat.agent_id,
        session_id=weather_chat.session_id,
        turn_id=paused.turn_id,
        tool_responses=weather_response(paused),
        stream=False,
    )
    assert isinstance(turn, Turn)
    assert turn.turn_id == paused.turn_id
    assert [s.step_type for s in turn.steps] == ["inference", "tool_execution", "inference"]
    assert turn.output_message.content == "Sunny in Paris."


def test_resume_sends_the_tool_result_to_the_model(
    client: LlamaStackClient, weather_chat: Conversation, model: Served
) -> None:
    """After a resume, the model's next request ends with the tool message answering the call."""
    paused = pause_on_weather(client, weather_chat, model)
    model.enqueue_text("Sunny in Paris.")
    client.agents.turn.resume(
        agent_id=weather_chat.agent_id,
        session_id=weather_chat.session_id,
        turn_id=paused.turn_id,
        tool_responses=weather_response(paused),
        stream=False,
    )
    call_id = paused.output_message.tool_calls[0].call_id
    last = model.requests()[-1]["messages"][-1]
    assert last == {"role": "tool", "tool_call_id": call_id, "content": "sunny, 21C"}


def test_paused_tool_step_completes_with_the_same_step_id_on_resume(
    client: LlamaStackClient, weather_chat: Conversation, model: Served
) -> None:
    """The tool_execution step started before the pause is the one step_complete names after the resume."""
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    before = stream_turn(client, weather_chat)
    started = before[-2].event.payload
    assert (started.event_type, started.step_type) == ("step_start", "tool_execution")
    paused = before[-1].event.payload.turn
    model.enqueue_text("Sunny in Paris.")
    after = client.agents.turn.resume(
        agent_id=weather_chat.agent_id,
        session_id=weather_chat.session_id,
        turn_id=paused.turn_id,
        tool_responses=weather_response(paused),
        stream=True,
    )
    completed = [c.event.payload for c in after if c.event.payload.event_type == "step_complete"]
    assert completed[0].step_id == started.step_id
    assert completed[0].step_details.tool_calls[0].call_id == paused.output_message.tool_calls[0].call_id


def test_turn_retrieve_of_a_paused_turn_shows_the_pending_call(
    client: LlamaStackClient, weather_chat: Conversation, model: Served
) -> None:
    """A turn awaiting input parses as ``Turn``: its output message holds the call, its status says it waits."""
    paused = pause_on_weather(client, weather_chat, model)
    turn = client.agents.turn.retrieve(
        agent_id=weather_chat.agent_id, session_id=weather_chat.session_id, turn_id=paused.turn_id
    )
    assert turn.output_message.tool_calls[0].call_id == paused.output_message.tool_calls[0].call_id
    assert [s.step_type for s in turn.steps] == ["inference"]
    assert turn.to_dict()["status"] == "awaiting_input"


def test_resume_answers_several_calls_at_once(
    client: LlamaStackClient, weather_chat: Conversation, model: Served
) -> None:
    """Two client tool calls in one model message are answered by one resume; the model gets both results."""
    calls = [ScriptedToolCall(name="get_weather", arguments={"city": city}) for city in ("Paris", "Rome")]
    model.enqueue(ScriptedReply(tool_calls=calls), ScriptedReply(text="Sunny in both."))
    paused = stream_turn(client, weather_chat)[-1].event.payload.turn
    responses = [
        {"call_id": c.call_id, "tool_name": c.tool_name, "content": f"sunny in {c.arguments['city']}"}
        for c in reversed(paused.output_message.tool_calls)
    ]
    turn = client.agents.turn.resume(
        agent_id=weather_chat.agent_id,
        session_id=weather_chat.session_id,
        turn_id=paused.turn_id,
        tool_responses=responses,
        stream=False,
    )
    assert [r.content for r in turn.steps[1].tool_responses] == ["sunny in Paris", "sunny in Rome"]
    tool_messages = [m["content"] for m in model.requests()[-1]["messages"] if m["role"] == "tool"]
    assert tool_messages == ["sunny in Paris", "sunny in Rome"]


def test_turn_toolgroups_add_server_tools_for_that_turn(
    client: LlamaStackClient, chat: Conversation, model: Served
) -> None:
    """``turn.create(toolgroups=["builtin::math"])`` lets the model call the calculator, run by the server."""
    model.enqueue_tool_call("calculator", {"expression": "6 * 7"})
    model.enqueue_text("42")
    turn = client.agents.turn.create(
        agent_id=chat.agent_id, session_id=chat.session_id, messages=USER, toolgroups=["builtin::math"], stream=False
    )
    assert model.requests()[0]["tools"][0]["function"]["name"] == "calculator"
    assert turn.steps[1].tool_responses[0].content == "42"


def test_turn_documents_reach_the_model(client: LlamaStackClient, chat: Conversation, model: Served) -> None:
    """``turn.create(documents=[...])`` gives the document's text to the model with the user's message."""
    model.enqueue_text("Noted.")
    client.agents.turn.create(
        agent_id=chat.agent_id,
        session_id=chat.session_id,
        messages=USER,
        documents=[{"content": "Paris forecast: rain.", "mime_type": "text/plain"}],
        stream=False,
    )
    user = model.requests()[0]["messages"][-1]
    assert user["role"] == "user"
    assert "Paris forecast: rain." in user["content"]


# ---- errors ----------------------------------------------------------------


def test_unknown_agent_is_not_found(client: LlamaStackClient) -> None:
    """Any call on an agent id that does not exist raises ``llama_stack_client.NotFoundError``."""
    with pytest.raises(llama_stack_client.NotFoundError) as caught:
        client.agents.session.create(agent_id="no-such-agent", session_name="s")
    assert caught.value.status_code == 404


def test_unknown_turn_is_not_found(client: LlamaStackClient, chat: Conversation) -> None:
    """``turn.retrieve`` of a turn id that does not exist raises ``NotFoundError``."""
    with pytest.raises(llama_stack_client.NotFoundError):
        client.agents.turn.retrieve(agent_id=chat.agent_id, session_id=chat.session_id, turn_id="no-such-turn")


def test_resume_of_a_completed_turn_is_a_conflict(
    client: LlamaStackClient, weather_chat: Conversation, model: Served
) -> None:
    """Resuming a turn that is not awaiting input raises ``ConflictError`` (409)."""
    model.enqueue_text("No tools needed.")
    turn = create_turn(client, weather_chat)
    with pytest.raises(llama_stack_client.ConflictError) as caught:
        client.agents.turn.resume(
            agent_id=weather_chat.agent_id,
            session_id=weather_chat.session_id,
            turn_id=turn.turn_id,
            tool_responses=[{"call_id": "call_x", "tool_name": "get_weather", "content": "sunny"}],
            stream=False,
        )
    assert caught.value.status_code == 409


def counting_client(model: Served, monkeypatch: pytest.MonkeyPatch) -> tuple[LlamaStackClient, list[str]]:
    """A client with the library's default retries (back-off patched to zero) that records each request."""
    sent: list[str] = []
    hooks = {"request": [lambda request: sent.append(f"{request.method} {request.url.path}")]}
    llama = LlamaStackClient(base_url=BASE_URL, http_client=model.http_client(event_hooks=hooks))
    monkeypatch.setattr(llama, "_calculate_retry_timeout", lambda *args, **kwargs: 0.0)
    return llama, sent


def test_conflict_is_not_retried_by_a_default_client(
    weather_chat: Conversation,
    model: Served,
    monkeypatch: pytest.MonkeyPatch,
    client: LlamaStackClient,
) -> None:
    """A 409 on resume is final: a client with default settings sends the resume once.

    The Stainless-generated client retries 409 ("lock timeout") unless the
    response carries ``x-should-retry: false``; without it a user waits for the
    back-off (about 1.5 s by default) before seeing the ConflictError.
    """
    model.enqueue_text("No tools needed.")
    turn = create_turn(client, weather_chat)
    llama, sent = counting_client(model, monkeypatch)
    with llama, pytest.raises(llama_stack_client.ConflictError):
        llama.agents.turn.resume(
            agent_id=weather_chat.agent_id,
            session_id=weather_chat.session_id,
            turn_id=turn.turn_id,
            tool_responses=[{"call_id": "call_x", "tool_name": "get_weather", "content": "sunny"}],
            stream=False,
        )
    assert len(sent) == 1, f"the resume was sent {len(sent)} times"


# ---- upstream model failures -----------------------------------------------


def fail_upstream(model: Served) -> None:
    """Make the next model call fail at once (a 4xx, which the server's OpenAI client does not retry)."""
    model.enqueue_error(400, "model exploded")


def test_upstream_failure_ends_the_stream_with_an_error_chunk(
    client: LlamaStackClient, chat: Conversation, model: Served
) -> None:
    """A model answering 500 to every try ends the stream with a chunk that has ``error`` and no event.

    The server's OpenAI client tries three times, with its own back-off (about a
    second), before the turn fails.
    """
    for _ in range(3):
        model.enqueue_error(500, "model exploded")
    chunks = stream_turn(client, chat)
    *events, last = chunks
    assert [c.event.payload.event_type for c in events] == ["turn_start", "step_start"]
    assert not any(hasattr(c, "error") for c in events)
    assert hasattr(last, "error")
    assert last.event is None
    assert last.error["code"] == "upstream_error"
    assert "model exploded" in last.error["message"]
    assert last.error["turn_id"] == events[0].event.payload.turn_id


def test_failed_turn_is_stored_as_failed(client: LlamaStackClient, chat: Conversation, model: Served) -> None:
    """After an upstream failure, ``turn.retrieve`` parses; the ferryman extras say it failed."""
    fail_upstream(model)
    turn_id = stream_turn(client, chat)[0].event.payload.turn_id
    turn = client.agents.turn.retrieve(agent_id=chat.agent_id, session_id=chat.session_id, turn_id=turn_id)
    extras = turn.to_dict()
    assert extras["status"] == "failed"
    assert extras["error"]["code"] == "upstream_error"


def test_upstream_failure_of_a_non_streamed_turn_is_a_server_error(
    client: LlamaStackClient, chat: Conversation, model: Served
) -> None:
    """``turn.create(stream=False)`` whose model fails raises ``InternalServerError`` (502, upstream_error)."""
    fail_upstream(model)
    with pytest.raises(llama_stack_client.InternalServerError) as caught:
        create_turn(client, chat)
    assert caught.value.status_code == 502
    assert caught.value.body["error"]["code"] == "upstream_error"


def test_failed_non_streamed_turn_is_not_rerun_by_a_default_client(
    chat: Conversation,
    model: Served,
    monkeypatch: pytest.MonkeyPatch,
    client: LlamaStackClient,
) -> None:
    """A non-streamed turn that failed is final: a default client does not re-post it as new turns.

    The turn is already stored as failed when the 502 is sent; the client
    retries every 5xx unless told ``x-should-retry: false``, and each retry
    starts (and pays the model for) another turn.
    """
    fail_upstream(model)  # a re-run would find no reply: the scripted model fails the test then too
    llama, sent = counting_client(model, monkeypatch)
    with llama, pytest.raises(llama_stack_client.InternalServerError):
        create_turn(llama, chat)
    session = client.agents.session.retrieve(agent_id=chat.agent_id, session_id=chat.session_id)
    assert (len(sent), len(session.turns)) == (1, 1), "POSTs sent, turns stored"


def test_failed_non_streamed_resume_reports_the_upstream_error_to_a_default_client(
    weather_chat: Conversation,
    model: Served,
    monkeypatch: pytest.MonkeyPatch,
    client: LlamaStackClient,
) -> None:
    """A non-streamed resume whose model fails raises the 502 upstream error, even with default retries.

    The first answer is 502 and the turn is stored as failed; a retried resume
    then finds the turn "not awaiting input", so without ``x-should-retry:
    false`` the user ends up with a ConflictError that hides the real cause.
    """
    paused = pause_on_weather(client, weather_chat, model)
    fail_upstream(model)
    llama, sent = counting_client(model, monkeypatch)
    with llama, pytest.raises(llama_stack_client.APIStatusError) as caught:
        llama.agents.turn.resume(
            agent_id=weather_chat.agent_id,
            session_id=weather_chat.session_id,
            turn_id=paused.turn_id,
            tool_responses=weather_response(paused),
            stream=False,
        )
    assert (caught.value.status_code, len(sent)) == (502, 1), "final status, resumes sent"
