"""The OpenAI Responses and Conversations APIs, driven with the real ``openai`` SDK against ferryman.

The scripted model answers every model request; ``model.requests()`` shows the
chat-completion bodies ferryman sent it. Gated replies hold a response in
progress until the test opens the gate, so nothing here depends on timing:
tests wait on events of the app (a request reaching the model, the live runs
settling), never by polling. Stream replay is read with ``httpx`` directly, as SSE (``httpx-sse``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from ferryman.testing import ScriptedReply, ScriptedToolCall
from inprocess import BASE_URL, Served
from sse import frames

MODEL = "scripted-model"
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather of a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    },
}
TEXT_EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
]
TEXT_DONE_EVENTS = [
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]
CALL_EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
]

# ---- fixtures and helpers ---------------------------------------------------


@pytest.fixture()
def oai(model: Served) -> Iterator[openai.OpenAI]:
    """The real SDK on ferryman, never retrying, so each call is one request."""
    http = model.sdk_http_client()
    with openai.OpenAI(
        base_url=f"{BASE_URL}/v1", http_client=http, api_key="unused", max_retries=0, timeout=30
    ) as client:
        yield client


@pytest.fixture()
def gates(model: Served) -> Iterator[Callable[[], str]]:
    """Makes unique gate names; every one is opened at teardown, so no model request stays held."""
    names: list[str] = []

    def new_gate() -> str:
        names.append(f"gate-{uuid.uuid4().hex[:8]}")
        return names[-1]

    yield new_gate
    for name in names:
        model.open_gate(name)


def settled(oai: openai.OpenAI, model: Served, response_id: str) -> Any:
    """The response, once every run live in the app (a background one) has ended and stored its outcome."""
    model.wait_settled()
    return oai.responses.retrieve(response_id)


def weather_call(call_id: str = "c1", city: str = "Paris", gate: str | None = None) -> ScriptedReply:
    """A scripted reply that calls ``get_weather``."""
    return ScriptedReply(
        tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": city}, call_id=call_id)], gate=gate
    )


def call_output(call_id: str = "c1", output: str = "sunny, 21C") -> list[dict[str, Any]]:
    """The client's ``function_call_output`` input."""
    return [{"type": "function_call_output", "call_id": call_id, "output": output}]


def text_of(item: Any) -> str:
    """The text of a message item, whether its content is a string or a list of parts.

    Ferryman echoes a message given with string content as a string (see
    ``test_message_content_given_as_a_string_is_returned_as_parts``); the other
    tests read either form so that they check one thing each.
    """
    content = item.content
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content)


def roles(messages: list[dict[str, Any]]) -> list[str]:
    """The roles of a chat-completion request's messages."""
    return [m["role"] for m in messages]


def iter_sse(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The JSON ``data`` of each SSE event of a streamed response; checks ``event:`` names its ``type``."""
    for frame in frames(response):
        data = frame.json()
        assert frame.event == data["type"], (frame.event, data["type"])
        yield data


def read_sse(http: httpx.Client, method: str, path: str, **kwargs: Any) -> list[dict[str, Any]]:
    """Every event of one SSE response."""
    with http.stream(method, path, **kwargs) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(iter_sse(response))


def replay(http: httpx.Client, response_id: str, starting_after: int) -> list[dict[str, Any]]:
    """``GET /v1/responses/{id}?stream=true&starting_after=N``."""
    params = {"stream": "true", "starting_after": str(starting_after)}
    return read_sse(http, "GET", f"/v1/responses/{response_id}", params=params)


def assert_numbered(events: list[Any], first: int = 0) -> None:
    """Sequence numbers are consecutive from ``first``."""
    numbers = [e["sequence_number"] if isinstance(e, dict) else e.sequence_number for e in events]
    assert numbers == list(range(first, first + len(numbers)))


# ---- create: parameters and result ------------------------------------------


def test_create_returns_a_completed_response(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue_text("Hello there, friend")
    response = oai.responses.create(model=MODEL, input="Say hello")

    assert response.id.startswith("resp_")
    assert response.object == "response"
    assert response.status == "completed"
    assert response.model == MODEL
    assert response.output_text == "Hello there, friend"
    assert len(response.output) == 1
    message = response.output[0]
    assert message.type == "message" and message.role == "assistant" and message.status == "completed"
    assert message.id.startswith("msg_")
    assert response.usage is not None
    assert response.usage.input_tokens > 0
    assert response.usage.output_tokens > 0
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    assert response.error is None


def test_instructions_become_the_system_message(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue_text("ok")
    response = oai.responses.create(model=MODEL, input="hi", instructions="You are terse.")

    assert response.instructions == "You are terse."
    (request,) = model.requests()
    assert request["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
    ]


def test_sampling_parameters_reach_the_model(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue_text("ok")
    response = oai.responses.create(model=MODEL, input="hi", temperature=0.25, top_p=0.5, max_output_tokens=77)

    (request,) = model.requests()
    assert request["model"] == MODEL
    assert request["temperature"] == 0.25
    assert request["top_p"] == 0.5
    assert request["max_tokens"] == 77
    assert (response.temperature, response.top_p, response.max_output_tokens) == (0.25, 0.5, 77)


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}},
    "required": ["city", "temperature"],
    "additionalProperties": False,
}
JSON_SCHEMA_FORMAT: dict[str, Any] = {"type": "json_schema", "name": "weather", "schema": SCHEMA, "strict": True}


def test_json_schema_format_reaches_the_model_as_response_format(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue_text('{"city": "Paris", "temperature": 21}')
    response = oai.responses.create(model=MODEL, input="weather?", text={"format": JSON_SCHEMA_FORMAT})

    (request,) = model.requests()
    response_format = request["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"] == SCHEMA
    assert json.loads(response.output_text) == {"city": "Paris", "temperature": 21}


def test_json_schema_name_and_strict_reach_the_model(oai: openai.OpenAI, model: Served) -> None:
    """OpenAI's ``response_format.json_schema`` carries the format's ``name`` and ``strict`` too.

    Known bug: ferryman sends ``name: "response"`` and drops ``strict``.
    """
    model.enqueue_text('{"city": "Paris", "temperature": 21}')
    oai.responses.create(model=MODEL, input="weather?", text={"format": JSON_SCHEMA_FORMAT})

    json_schema = model.requests()[0]["response_format"]["json_schema"]
    assert json_schema["name"] == "weather"
    assert json_schema.get("strict") is True


def test_json_schema_format_is_echoed_with_its_schema(oai: openai.OpenAI, model: Served) -> None:
    """The response echoes ``text.format`` as given, under the wire name ``schema``.

    Known bug: ferryman serialises the field under its Python name ``schema_``,
    so the SDK (and any client) sees no schema.
    """
    model.enqueue_text('{"city": "Paris", "temperature": 21}')
    response = oai.responses.create(model=MODEL, input="weather?", text={"format": JSON_SCHEMA_FORMAT})

    text_format = response.text.format
    assert text_format.type == "json_schema"
    assert text_format.name == "weather"
    assert text_format.schema_ == SCHEMA
    retrieved = oai.responses.retrieve(response.id).text.format
    assert retrieved.type == "json_schema" and retrieved.schema_ == SCHEMA


# ---- streaming -----------------------------------------------------------------


def test_stream_events_follow_openai_order(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue(ScriptedReply(text="one two three", chunks=3))
    events = list(oai.responses.create(model=MODEL, input="count", stream=True))

    assert [e.type for e in events] == [*TEXT_EVENTS, *["response.output_text.delta"] * 3, *TEXT_DONE_EVENTS]
    assert_numbered(events)
    created, in_progress = events[0].response, events[1].response
    assert created.status == "in_progress" and created.output == []
    assert in_progress.id == created.id
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "one two three"
    item_ids = {e.item_id for e in events if hasattr(e, "item_id")}
    assert len(item_ids) == 1
    assert events[2].item.id in item_ids and events[2].output_index == 0
    done = events[-4]
    assert done.text == "one two three"
    assert events[-3].part.text == "one two three"
    assert events[-2].item.status == "completed" and text_of(events[-2].item) == "one two three"

    completed = events[-1].response
    assert completed.status == "completed"
    assert completed.output_text == "one two three"
    assert completed.usage is not None and completed.usage.output_tokens > 0
    stored = oai.responses.retrieve(completed.id)
    assert stored.status == "completed" and stored.output_text == "one two three"


def test_stream_helper(oai: openai.OpenAI, model: Served) -> None:
    """``client.responses.stream(...)`` accumulates the events into the final response."""
    model.enqueue_text("streamed with the helper")
    with oai.responses.stream(model=MODEL, input="hi", instructions="Be brief.") as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()

    assert types[0] == "response.created" and types[-1] == "response.completed"
    assert final.status == "completed"
    assert final.output_text == "streamed with the helper"
    assert roles(model.requests()[0]["messages"]) == ["system", "user"]


def test_stream_helper_resumes_a_background_response_by_id(
    oai: openai.OpenAI, model: Served, gates: Callable[[], str]
) -> None:
    """``client.responses.stream(response_id=...)`` reads a running background response to its end."""
    gate = gates()
    model.enqueue_text("resumed to the end", gate=gate)
    started = oai.responses.create(model=MODEL, input="hi", background=True)
    model.wait_for_requests(1)

    with oai.responses.stream(response_id=started.id) as stream:
        types = []
        for event in stream:
            types.append(event.type)
            if event.type == "response.in_progress":
                model.open_gate(gate)
        final = stream.get_final_response()

    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert final.id == started.id and final.output_text == "resumed to the end"


# ---- function calls --------------------------------------------------------------


def test_function_call_round_trip_via_previous_response_id(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue(weather_call("c1", "Paris"))
    model.enqueue_text("It is sunny in Paris.")

    first = oai.responses.create(model=MODEL, input="Weather in Paris?", tools=[WEATHER_TOOL])
    assert first.status == "completed"
    (call,) = first.output
    assert call.type == "function_call"
    assert call.call_id == "c1" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert call.id.startswith("fc_") and call.status == "completed"

    second = oai.responses.create(
        model=MODEL, previous_response_id=first.id, input=call_output("c1", "sunny, 21C"), tools=[WEATHER_TOOL]
    )
    assert second.previous_response_id == first.id
    assert second.output_text == "It is sunny in Paris."

    first_request, second_request = model.requests()
    assert first_request["tools"][0]["function"]["name"] == "get_weather"
    messages = second_request["messages"]
    assert roles(messages) == ["user", "assistant", "tool"]
    assert messages[0]["content"] == "Weather in Paris?"
    (tool_call,) = messages[1]["tool_calls"]
    assert tool_call["id"] == "c1" and tool_call["function"]["name"] == "get_weather"
    assert json.loads(tool_call["function"]["arguments"]) == {"city": "Paris"}
    assert messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21C"}

    (given,) = oai.responses.input_items.list(second.id).data
    assert given.type == "function_call_output" and given.call_id == "c1" and given.output == "sunny, 21C"


def test_streamed_function_call_events(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue(weather_call("c7", "Oslo"))
    model.enqueue_text("Cold in Oslo.")

    events = list(oai.responses.create(model=MODEL, input="Oslo?", tools=[WEATHER_TOOL], stream=True))
    assert [e.type for e in events] == CALL_EVENTS
    assert_numbered(events)
    added, delta, done, item_done = events[2], events[3], events[4], events[5]
    assert added.item.type == "function_call" and added.item.call_id == "c7" and added.item.name == "get_weather"
    assert json.loads(delta.delta) == {"city": "Oslo"}
    assert json.loads(done.arguments) == {"city": "Oslo"}
    assert done.item_id == added.item.id == item_done.item.id
    assert json.loads(item_done.item.arguments) == {"city": "Oslo"}
    first = events[-1].response
    assert [o.type for o in first.output] == ["function_call"]

    second = list(
        oai.responses.create(
            model=MODEL,
            previous_response_id=first.id,
            input=call_output("c7", "-5C"),
            tools=[WEATHER_TOOL],
            stream=True,
        )
    )
    assert second[-1].type == "response.completed"
    assert second[-1].response.output_text == "Cold in Oslo."
    assert roles(model.requests()[1]["messages"]) == ["user", "assistant", "tool"]


def test_item_and_content_part_events_carry_llama_stack_response_id(model: Served, http: httpx.Client) -> None:
    """Llama Stack's item and content-part events also name their response; no other event changes.

    llama-stack-client 0.7.5 drops such an event without ``response_id`` (its
    ``Agent`` then never sees a function call: test_llama_stack_responses_agent.py).
    """
    model.enqueue(ScriptedReply(text="Checking.", tool_calls=weather_call("c8", "Oslo").tool_calls))
    body = {"model": MODEL, "input": "Oslo?", "tools": [WEATHER_TOOL], "stream": True}
    events = read_sse(http, "POST", "/v1/responses", json=body)

    named = [e for e in events if "response_id" in e]
    assert {e["type"] for e in named} == {
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
    }
    assert len(named) == 6  # the message's item and part, the call's item
    assert {e["response_id"] for e in named} == {events[0]["response"]["id"]}


def test_text_and_parallel_calls_in_one_response(oai: openai.OpenAI, model: Served) -> None:
    """Text before two calls: one message item, two call items; the follow-up joins them in one assistant turn."""
    calls = [
        ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}, call_id="p1"),
        ScriptedToolCall(name="get_weather", arguments={"city": "Rome"}, call_id="p2"),
    ]
    model.enqueue(ScriptedReply(text="Checking both.", tool_calls=calls))
    model.enqueue_text("Both sunny.")

    first = oai.responses.create(model=MODEL, input="Paris and Rome?", tools=[WEATHER_TOOL])
    assert [o.type for o in first.output] == ["message", "function_call", "function_call"]
    assert [o.call_id for o in first.output[1:]] == ["p1", "p2"]
    assert first.output_text == "Checking both."

    outputs = [*call_output("p1", "sunny"), *call_output("p2", "sunny too")]
    oai.responses.create(model=MODEL, previous_response_id=first.id, input=outputs, tools=[WEATHER_TOOL])
    messages = model.requests()[1]["messages"]
    assert roles(messages) == ["user", "assistant", "tool", "tool"]
    assert messages[1]["content"] == "Checking both."
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["p1", "p2"]
    assert [(m["tool_call_id"], m["content"]) for m in messages[2:]] == [("p1", "sunny"), ("p2", "sunny too")]


def test_function_call_round_trip_via_conversation(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue(weather_call("c1", "Paris"))
    model.enqueue_text("It is sunny in Paris.")
    conversation = oai.conversations.create()

    first = oai.responses.create(
        model=MODEL, input="Weather in Paris?", conversation=conversation.id, tools=[WEATHER_TOOL]
    )
    assert first.conversation is not None and first.conversation.id == conversation.id
    assert [o.type for o in first.output] == ["function_call"]
    second = oai.responses.create(
        model=MODEL, input=call_output("c1", "sunny, 21C"), conversation={"id": conversation.id}, tools=[WEATHER_TOOL]
    )
    assert second.output_text == "It is sunny in Paris."

    messages = model.requests()[1]["messages"]
    assert roles(messages) == ["user", "assistant", "tool"]
    assert messages[1]["tool_calls"][0]["id"] == "c1"
    assert messages[2]["content"] == "sunny, 21C"

    items = oai.conversations.items.list(conversation.id, order="asc").data
    assert [i.type for i in items] == ["message", "function_call", "function_call_output", "message"]
    user, call, result, answer = items
    assert user.role == "user" and text_of(user) == "Weather in Paris?"
    assert call.call_id == "c1" and call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert call.id == first.output[0].id
    assert result.call_id == "c1" and result.output == "sunny, 21C"
    assert answer.role == "assistant" and text_of(answer) == "It is sunny in Paris."
    assert answer.id == second.output[0].id


def newest_response(http: httpx.Client) -> dict[str, Any]:
    """The most recently created response (each test worker has its own server, and its tests run one at a time)."""
    data: list[dict[str, Any]] = http.get("/v1/responses", params={"limit": 1}).json()["data"]
    return data[0]


def responses_since(http: httpx.Client, response_id: str) -> list[dict[str, Any]]:
    """The responses created after ``response_id``, oldest first."""
    data: list[dict[str, Any]] = http.get(
        "/v1/responses", params={"order": "asc", "after": response_id, "limit": 100}
    ).json()["data"]
    return data


def test_duplicate_item_ids_in_one_input_leave_the_conversation_usable(
    oai: openai.OpenAI, model: Served, http: httpx.Client
) -> None:
    """Two input items with one id are refused (400), and the refusal leaves nothing behind.

    Known bug: ferryman starts the turn (taking the conversation's lock) and
    stores the response before it stores the input items; the duplicate id
    fails there, and nothing undoes the start: the response stays
    ``in_progress`` for ever and every later response on the conversation
    gets 409 ``conversation_locked``.
    """
    model.enqueue_text("before")
    before = oai.responses.create(model=MODEL, input="before")
    conversation = oai.conversations.create()
    duplicated = [
        {"type": "message", "id": "msg_same", "role": "user", "content": "one"},
        {"type": "message", "id": "msg_same", "role": "user", "content": "two"},
    ]
    with pytest.raises(openai.BadRequestError):
        oai.responses.create(model=MODEL, input=duplicated, conversation=conversation.id)
    assert len(model.requests()) == 1
    left_behind = responses_since(http, before.id)

    model.enqueue_text("still usable")
    after = oai.responses.create(model=MODEL, input="next", conversation=conversation.id)
    assert after.output_text == "still usable"
    assert [r["status"] for r in left_behind if r["status"] == "in_progress"] == []


def test_resending_an_item_already_in_the_conversation(oai: openai.OpenAI, model: Served, http: httpx.Client) -> None:
    """A client that sends back the ``function_call`` item it got (same id) with its output.

    Either is fine: refusing it up front (400, before the model runs) or
    accepting it. Known bug: ferryman runs the model, then fails to append the
    items to the conversation (the id is taken), answers 400 after the fact,
    and leaves the response stored as ``in_progress`` for ever.
    """
    conversation = oai.conversations.create()
    model.enqueue(weather_call("c1", "Paris"))
    first = oai.responses.create(model=MODEL, input="Weather?", conversation=conversation.id, tools=[WEATHER_TOOL])
    call = first.output[0]
    model.enqueue_text("sunny")
    echoed = {
        "type": "function_call",
        "id": call.id,
        "call_id": "c1",
        "name": "get_weather",
        "arguments": call.arguments,
    }

    try:
        second = oai.responses.create(
            model=MODEL, input=[echoed, *call_output("c1", "sunny")], conversation=conversation.id, tools=[WEATHER_TOOL]
        )
    except openai.BadRequestError:
        assert len(model.requests()) == 1, "refused only after the model ran"
        assert [r["status"] for r in responses_since(http, first.id) if r["status"] == "in_progress"] == []
        assert len(oai.conversations.items.list(conversation.id).data) == 2
    else:
        assert second.status == "completed" and second.output_text == "sunny"
        assert oai.responses.retrieve(second.id).status == "completed"
        items = oai.conversations.items.list(conversation.id, order="asc").data
        assert [i.type for i in items] == ["message", "function_call", "function_call_output", "message"]
        assert roles(model.requests()[1]["messages"]) == ["user", "assistant", "tool"], "the call is in history once"


def test_previous_response_id_with_conversation_is_rejected(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue_text("first")
    first = oai.responses.create(model=MODEL, input="hi")
    conversation = oai.conversations.create()

    with pytest.raises(openai.BadRequestError) as raised:
        oai.responses.create(model=MODEL, input="again", previous_response_id=first.id, conversation=conversation.id)
    assert raised.value.status_code == 400
    assert len(model.requests()) == 1


def test_previous_response_still_in_progress_is_not_chained_on(
    oai: openai.OpenAI, model: Served, gates: Callable[[], str]
) -> None:
    """Chaining on a response that has no output yet cannot give the model the right history.

    OpenAI refuses it; known bug: ferryman accepts it and sends the model the
    previous input without its (not yet written) answer: ``[user, user]``.
    """
    gate = gates()
    model.enqueue_text("first answer", gate=gate)  # nothing for a second: it must not reach the model
    first = oai.responses.create(model=MODEL, input="first question", background=True)
    model.wait_for_requests(1)

    with pytest.raises(openai.APIStatusError) as raised:
        oai.responses.create(model=MODEL, input="second question", previous_response_id=first.id)
    assert raised.value.status_code in (400, 409)


# ---- input items -------------------------------------------------------------------


def user_message(text: str) -> dict[str, Any]:
    """A user message item in content-part form."""
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def five_messages() -> list[dict[str, Any]]:
    """Five user messages ``m0``…``m4`` in content-part form."""
    return [user_message(f"m{i}") for i in range(5)]


def test_input_items_list_order_limit_after(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue_text("ok")
    response = oai.responses.create(model=MODEL, input=five_messages())
    assert roles(model.requests()[0]["messages"]) == ["user"] * 5

    newest_first = oai.responses.input_items.list(response.id)
    assert [text_of(i) for i in newest_first.data] == ["m4", "m3", "m2", "m1", "m0"]
    assert newest_first.has_more is False
    assert newest_first.first_id == newest_first.data[0].id and newest_first.last_id == newest_first.data[-1].id
    assert all(i.id.startswith("msg_") for i in newest_first.data)

    page = oai.responses.input_items.list(response.id, order="asc", limit=2)
    assert [text_of(i) for i in page.data] == ["m0", "m1"] and page.has_more is True
    page = oai.responses.input_items.list(response.id, order="asc", limit=2, after=page.data[-1].id)
    assert [text_of(i) for i in page.data] == ["m2", "m3"] and page.has_more is True
    page = oai.responses.input_items.list(response.id, order="asc", limit=2, after=page.data[-1].id)
    assert [text_of(i) for i in page.data] == ["m4"] and page.has_more is False

    page = oai.responses.input_items.list(response.id, order="desc", limit=3, after=newest_first.data[0].id)
    assert [text_of(i) for i in page.data] == ["m3", "m2", "m1"] and page.has_more is True

    every = list(oai.responses.input_items.list(response.id, order="asc", limit=2))
    assert [text_of(i) for i in every] == ["m0", "m1", "m2", "m3", "m4"]


def test_input_items_pagination_of_a_response_in_a_conversation(oai: openai.OpenAI, model: Served) -> None:
    """Paging a response's input items with ``after`` works when the response ran in a conversation.

    Known bug: the ``after`` cursor is looked up by item id alone, and the
    conversation holds a copy of each input item under the same id, so the
    cursor lands on the conversation's copy and the next page comes back empty.
    """
    model.enqueue_text("ok")
    conversation = oai.conversations.create()
    response = oai.responses.create(model=MODEL, input=five_messages(), conversation=conversation.id)

    first = oai.responses.input_items.list(response.id, order="asc", limit=2)
    assert [text_of(i) for i in first.data] == ["m0", "m1"] and first.has_more is True
    second = oai.responses.input_items.list(response.id, order="asc", limit=2, after=first.data[-1].id)
    assert [text_of(i) for i in second.data] == ["m2", "m3"]
    every = list(oai.responses.input_items.list(response.id, order="asc", limit=2))
    assert [text_of(i) for i in every] == ["m0", "m1", "m2", "m3", "m4"]


def test_message_content_given_as_a_string_is_returned_as_parts(oai: openai.OpenAI, model: Served) -> None:
    """OpenAI returns stored messages with a list of content parts (``input_text``), whatever form the input had.

    Known bug: ferryman stores and returns the string as given, which the SDK
    then parses as the wrong item type.
    """
    model.enqueue_text("ok")
    response = oai.responses.create(model=MODEL, input="plain string input")
    (item,) = oai.responses.input_items.list(response.id).data
    assert item.type == "message" and item.role == "user"
    assert isinstance(item.content, list)
    assert [(p.type, p.text) for p in item.content] == [("input_text", "plain string input")]

    conversation = oai.conversations.create(items=[{"type": "message", "role": "user", "content": "hello"}])
    (stored,) = oai.conversations.items.list(conversation.id).data
    assert isinstance(stored.content, list)
    assert [(p.type, p.text) for p in stored.content] == [("input_text", "hello")]


# ---- conversations -------------------------------------------------------------------


def test_conversation_create_retrieve_update_delete(oai: openai.OpenAI) -> None:
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi!"}]},
    ]
    conversation = oai.conversations.create(items=items, metadata={"topic": "greeting"})
    assert conversation.id.startswith("conv_")
    assert conversation.object == "conversation"
    assert conversation.metadata == {"topic": "greeting"}
    assert conversation.created_at > 0

    retrieved = oai.conversations.retrieve(conversation.id)
    assert (retrieved.id, retrieved.metadata, retrieved.created_at) == (
        conversation.id,
        {"topic": "greeting"},
        conversation.created_at,
    )
    stored = oai.conversations.items.list(conversation.id, order="asc").data
    assert [(i.role, text_of(i)) for i in stored] == [("user", "hello"), ("assistant", "hi!")]

    updated = oai.conversations.update(conversation.id, metadata={"topic": "farewell", "n": "2"})
    assert updated.metadata == {"topic": "farewell", "n": "2"}
    assert oai.conversations.retrieve(conversation.id).metadata == {"topic": "farewell", "n": "2"}

    deleted = oai.conversations.delete(conversation.id)
    assert deleted.id == conversation.id and deleted.deleted is True
    with pytest.raises(openai.NotFoundError):
        oai.conversations.retrieve(conversation.id)
    with pytest.raises(openai.NotFoundError):
        oai.conversations.items.list(conversation.id)
    with pytest.raises(openai.NotFoundError):
        oai.conversations.delete(conversation.id)


def test_conversation_items_create_list_retrieve_delete(oai: openai.OpenAI) -> None:
    conversation = oai.conversations.create()
    assert oai.conversations.items.list(conversation.id).data == []

    added = oai.conversations.items.create(
        conversation.id,
        items=[user_message(f"i{n}") for n in range(3)],
    )
    assert [text_of(i) for i in added.data] == ["i0", "i1", "i2"]
    assert added.first_id == added.data[0].id and added.last_id == added.data[-1].id
    more = oai.conversations.items.create(
        conversation.id,
        items=[user_message(f"i{n}") for n in (3, 4)],
    )
    ids = [i.id for i in added.data] + [i.id for i in more.data]
    assert len(set(ids)) == 5

    page = oai.conversations.items.list(conversation.id, order="asc", limit=2)
    assert [i.id for i in page.data] == ids[:2] and page.has_more is True
    page = oai.conversations.items.list(conversation.id, order="asc", limit=2, after=page.data[-1].id)
    assert [i.id for i in page.data] == ids[2:4] and page.has_more is True
    page = oai.conversations.items.list(conversation.id, order="asc", limit=2, after=page.data[-1].id)
    assert [i.id for i in page.data] == ids[4:] and page.has_more is False
    exact = oai.conversations.items.list(conversation.id, order="asc", limit=5)
    assert [i.id for i in exact.data] == ids and exact.has_more is False

    newest = oai.conversations.items.list(conversation.id)
    assert [i.id for i in newest.data] == ids[::-1]
    page = oai.conversations.items.list(conversation.id, order="desc", limit=2, after=ids[3])
    assert [i.id for i in page.data] == [ids[2], ids[1]] and page.has_more is True
    assert [i.id for i in oai.conversations.items.list(conversation.id, order="asc", limit=2)] == ids

    item = oai.conversations.items.retrieve(ids[2], conversation_id=conversation.id)
    assert item.id == ids[2] and text_of(item) == "i2"

    after_delete = oai.conversations.items.delete(ids[2], conversation_id=conversation.id)
    assert after_delete.id == conversation.id and after_delete.object == "conversation"
    assert [i.id for i in oai.conversations.items.list(conversation.id, order="asc")] == ids[:2] + ids[3:]
    with pytest.raises(openai.NotFoundError):
        oai.conversations.items.retrieve(ids[2], conversation_id=conversation.id)
    with pytest.raises(openai.NotFoundError):
        oai.conversations.items.delete(ids[2], conversation_id=conversation.id)


def test_responses_in_a_conversation_see_its_items(oai: openai.OpenAI, model: Served) -> None:
    """Items added by hand are history; a deleted item is not."""
    conversation = oai.conversations.create(items=[{"type": "message", "role": "user", "content": "My name is Ada."}])
    model.enqueue_text("Nice to meet you, Ada.")
    oai.responses.create(model=MODEL, input="Remember it.", conversation=conversation.id)
    extra = oai.conversations.items.create(
        conversation.id, items=[{"type": "message", "role": "user", "content": "I live in Paris."}]
    )
    oai.conversations.items.delete(extra.data[0].id, conversation_id=conversation.id)
    model.enqueue_text("Ada.")
    oai.responses.create(model=MODEL, input="What is my name?", conversation=conversation.id)

    messages = model.requests()[1]["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "My name is Ada."),
        ("user", "Remember it."),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "What is my name?"),
    ]


# ---- one response at a time per conversation -------------------------------------------


def assert_locked(oai: openai.OpenAI, conversation_id: str) -> None:
    """A second response on the conversation is refused with 409 ``conversation_locked``."""
    with pytest.raises(openai.ConflictError) as raised:
        oai.responses.create(model=MODEL, input="second question", conversation=conversation_id)
    assert raised.value.status_code == 409
    assert raised.value.code == "conversation_locked"
    assert isinstance(raised.value.body, dict) and raised.value.body["code"] == "conversation_locked"


def assert_not_interleaved(oai: openai.OpenAI, model: Served, conversation_id: str) -> None:
    """The refused request left no trace; the next response sees exactly the first exchange."""
    items = oai.conversations.items.list(conversation_id, order="asc").data
    assert [(i.role, text_of(i)) for i in items] == [("user", "first question"), ("assistant", "first answer")]
    model.enqueue_text("third answer")
    oai.responses.create(model=MODEL, input="third question", conversation=conversation_id)
    messages = model.requests()[-1]["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "third question"),
    ]


def test_second_response_on_a_busy_conversation_gets_409_streamed(
    oai: openai.OpenAI, model: Served, gates: Callable[[], str]
) -> None:
    gate = gates()
    model.enqueue_text("first answer", gate=gate)
    conversation = oai.conversations.create()

    with oai.responses.create(model=MODEL, input="first question", conversation=conversation.id, stream=True) as stream:
        events = iter(stream)
        assert next(events).type == "response.created"
        model.wait_for_requests(1)
        assert_locked(oai, conversation.id)
        model.open_gate(gate)
        rest = list(events)
    assert rest[-1].type == "response.completed" and rest[-1].response.output_text == "first answer"
    assert len(model.requests()) == 1
    assert_not_interleaved(oai, model, conversation.id)


def test_second_response_on_a_busy_conversation_gets_409_threaded(
    oai: openai.OpenAI, model: Served, gates: Callable[[], str]
) -> None:
    gate = gates()
    model.enqueue_text("first answer", gate=gate)
    conversation = oai.conversations.create()

    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(oai.responses.create, model=MODEL, input="first question", conversation=conversation.id)
        model.wait_for_requests(1)
        assert_locked(oai, conversation.id)
        model.open_gate(gate)
        assert first.result(timeout=30).output_text == "first answer"
    assert_not_interleaved(oai, model, conversation.id)


# ---- background, cancel, retrieve, delete, list ------------------------------------------


def test_background_response_completes(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue_text("done in the background")
    started = oai.responses.create(model=MODEL, input="work", background=True)
    assert started.status in ("queued", "in_progress")
    assert started.background is True

    finished = settled(oai, model, started.id)
    assert finished.status == "completed"
    assert finished.output_text == "done in the background"
    assert finished.usage is not None and finished.usage.output_tokens > 0


def test_cancel_a_background_response(oai: openai.OpenAI, model: Served, gates: Callable[[], str]) -> None:
    gate = gates()
    model.enqueue_text("never seen", gate=gate)
    started = oai.responses.create(model=MODEL, input="slow work", background=True)
    model.wait_for_requests(1)
    assert oai.responses.retrieve(started.id).status == "in_progress"

    cancelled = oai.responses.cancel(started.id)
    assert cancelled.id == started.id and cancelled.status == "cancelled"
    again = oai.responses.cancel(started.id)
    assert again.status == "cancelled"
    model.open_gate(gate)
    stored = oai.responses.retrieve(started.id)
    assert stored.status == "cancelled"
    assert stored.output_text == ""


def test_cancel_of_a_foreground_response_is_rejected(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue_text("ok")
    response = oai.responses.create(model=MODEL, input="hi")
    with pytest.raises(openai.BadRequestError):
        oai.responses.cancel(response.id)
    assert oai.responses.retrieve(response.id).status == "completed"
    with pytest.raises(openai.NotFoundError):
        oai.responses.cancel("resp_does_not_exist")


def test_cancel_of_a_finished_background_response_changes_nothing(
    oai: openai.OpenAI, model: Served, http: httpx.Client
) -> None:
    """Cancelling a completed background response returns it unchanged.

    The test waits until the run settled, so that the *stored* response (which
    ``GET /v1/responses`` lists) is completed, not only the live one ``retrieve``
    shows: known race, ferryman's ``cancel`` of a response that ``retrieve``
    already shows as completed but that is still writing itself to the store
    cancels its task and answers the stale stored copy (status ``queued``),
    about once in 300 tries.
    """
    model.enqueue_text("finished")
    started = oai.responses.create(model=MODEL, input="hi", background=True)
    assert settled(oai, model, started.id).status == "completed"
    listed = http.get("/v1/responses", params={"limit": 20}).json()["data"]
    assert [r["status"] for r in listed if r["id"] == started.id] == ["completed"]
    assert oai.responses.cancel(started.id).status == "completed"
    assert oai.responses.retrieve(started.id).output_text == "finished"


def test_cancelled_response_unlocks_its_conversation(
    oai: openai.OpenAI, model: Served, gates: Callable[[], str]
) -> None:
    gate = gates()
    model.enqueue_text("never seen", gate=gate)
    conversation = oai.conversations.create()
    started = oai.responses.create(model=MODEL, input="slow", conversation=conversation.id, background=True)
    model.wait_for_requests(1)
    assert oai.responses.cancel(started.id).status == "cancelled"
    model.open_gate(gate)

    model.enqueue_text("fresh answer")
    after = oai.responses.create(model=MODEL, input="again", conversation=conversation.id)
    assert after.output_text == "fresh answer"
    items = oai.conversations.items.list(conversation.id, order="asc").data
    assert [text_of(i) for i in items] == ["again", "fresh answer"]


def test_retrieve_while_in_progress(oai: openai.OpenAI, model: Served, gates: Callable[[], str]) -> None:
    gate = gates()
    model.enqueue_text("eventually", gate=gate)
    with oai.responses.create(model=MODEL, input="hold on", stream=True) as stream:
        events = iter(stream)
        response_id = next(events).response.id
        model.wait_for_requests(1)
        live = oai.responses.retrieve(response_id)
        assert live.status == "in_progress" and live.output == []
        model.open_gate(gate)
        assert [e.type for e in events][-1] == "response.completed"
    assert oai.responses.retrieve(response_id).status == "completed"


def test_delete_a_response(oai: openai.OpenAI, model: Served) -> None:
    model.enqueue_text("to be deleted")
    response = oai.responses.create(model=MODEL, input="hi")
    oai.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.input_items.list(response.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.delete(response.id)


def test_list_responses(oai: openai.OpenAI, model: Served, http: httpx.Client) -> None:
    """``GET /v1/responses``: newest first by default, cursor paging both ways (the SDK has no method for it)."""
    ids = []
    for n in range(3):
        model.enqueue_text(f"answer {n}")
        ids.append(oai.responses.create(model=MODEL, input=f"q{n}").id)

    newest = http.get("/v1/responses", params={"limit": 1}).json()
    assert newest["object"] == "list"
    assert [r["id"] for r in newest["data"]] == [ids[2]] and newest["has_more"] is True
    assert newest["first_id"] == newest["last_id"] == ids[2]
    page = http.get("/v1/responses", params={"limit": 1, "after": ids[2]}).json()
    assert [r["id"] for r in page["data"]] == [ids[1]] and page["has_more"] is True
    page = http.get("/v1/responses", params={"order": "asc", "after": ids[0], "limit": 10}).json()
    assert [r["id"] for r in page["data"]] == ids[1:] and page["has_more"] is False
    assert page["data"][-1]["status"] == "completed"
    assert page["data"][-1]["output"][0]["content"][0]["text"] == "answer 2"

    oai.responses.delete(ids[1])
    page = http.get("/v1/responses", params={"order": "asc", "after": ids[0]}).json()
    assert [r["id"] for r in page["data"]] == [ids[2]]


def test_listed_responses_carry_their_input_items(oai: openai.OpenAI, model: Served, http: httpx.Client) -> None:
    """Llama Stack lists each response with its ``input`` items (its client's listing model requires them)."""
    model.enqueue_text("ok")
    created = oai.responses.create(model=MODEL, input=[user_message("first"), user_message("second")])

    listed = newest_response(http)
    assert listed["id"] == created.id
    assert [(i["role"], i["content"][0]["text"]) for i in listed["input"]] == [("user", "first"), ("user", "second")]
    assert [i["id"] for i in listed["input"]] == [i.id for i in oai.responses.input_items.list(created.id, order="asc")]


# ---- stream replay --------------------------------------------------------------------


def test_replay_of_a_finished_response(oai: openai.OpenAI, model: Served, http: httpx.Client) -> None:
    model.enqueue(ScriptedReply(text="alpha beta gamma", chunks=3))
    body = {"model": MODEL, "input": "go", "stream": True}
    original = read_sse(http, "POST", "/v1/responses", json=body)
    assert_numbered(original)
    assert original[-1]["type"] == "response.completed"
    response_id = original[0]["response"]["id"]

    for after in (-1, 0, 3, 6, len(original) - 2, len(original) - 1):
        assert replay(http, response_id, after) == original[after + 1 :], after
    assert replay(http, response_id, len(original) + 5) == []

    sdk_events = list(oai.responses.retrieve(response_id, stream=True, starting_after=4))
    assert [e.sequence_number for e in sdk_events] == list(range(5, len(original)))


def test_every_stream_event_carries_its_number_as_sse_id_and_last_event_id_resumes(
    model: Served, http: httpx.Client
) -> None:
    model.enqueue(ScriptedReply(text="one two", chunks=2))
    body = {"model": MODEL, "input": "go", "stream": True}
    with http.stream("POST", "/v1/responses", json=body) as response:
        streamed = list(frames(response))
    ids = [int(frame.id) for frame in streamed]
    numbers = [frame.json()["sequence_number"] for frame in streamed]
    assert ids == numbers == list(range(len(numbers)))
    first = streamed[0].json()
    url = f"/v1/responses/{first['response']['id']}"
    resumed = read_sse(http, "GET", url, params={"stream": "true"}, headers={"Last-Event-ID": "3"})
    assert [event["sequence_number"] for event in resumed] == list(range(4, len(numbers)))
    # An explicit starting_after wins over the header.
    params = {"stream": "true", "starting_after": "5"}
    resumed = read_sse(http, "GET", url, params=params, headers={"Last-Event-ID": "1"})
    assert [event["sequence_number"] for event in resumed] == list(range(6, len(numbers)))


def test_replay_of_a_running_response_then_live_events(
    oai: openai.OpenAI, model: Served, http: httpx.Client, gates: Callable[[], str]
) -> None:
    gate = gates()
    model.enqueue(ScriptedReply(text="live one two", chunks=3, gate=gate))
    started = oai.responses.create(model=MODEL, input="go", background=True)
    model.wait_for_requests(1)
    assert oai.responses.retrieve(started.id).status == "in_progress"

    params = {"stream": "true", "starting_after": "0"}
    events = []
    with http.stream("GET", f"/v1/responses/{started.id}", params=params) as response:
        assert response.status_code == 200
        for event in iter_sse(response):
            events.append(event)
            if event["sequence_number"] == 1:
                model.open_gate(gate)
    assert [e["type"] for e in events] == [
        "response.in_progress",
        *TEXT_EVENTS[2:],
        *["response.output_text.delta"] * 3,
        *TEXT_DONE_EVENTS,
    ]
    assert_numbered(events, first=1)
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "live one two"
    assert replay(http, started.id, 0) == events


def test_background_stream_resumed_after_a_disconnect(
    oai: openai.OpenAI, model: Served, gates: Callable[[], str]
) -> None:
    """The OpenAI pattern: stream a background response, drop the connection, resume from the last number seen."""
    gate = gates()
    model.enqueue(ScriptedReply(text="survives the disconnect", gate=gate))
    with oai.responses.create(model=MODEL, input="go", background=True, stream=True) as stream:
        events = iter(stream)
        created = next(events)
        in_progress = next(events)
    assert (created.type, in_progress.type) == ("response.created", "response.in_progress")

    response_id, last_seen = created.response.id, in_progress.sequence_number
    model.wait_for_requests(1)
    model.open_gate(gate)
    rest = list(oai.responses.retrieve(response_id, stream=True, starting_after=last_seen))
    assert [e.sequence_number for e in rest] == list(range(last_seen + 1, last_seen + 1 + len(rest)))
    assert rest[0].type == "response.output_item.added"
    assert rest[-1].type == "response.completed"
    assert rest[-1].response.output_text == "survives the disconnect"


# ---- model failures -----------------------------------------------------------------------


def fail_model(model: Served) -> None:
    """Make the next model request fail for good (ferryman's client retries a 5xx twice)."""
    for _ in range(3):
        model.enqueue_error(500)


def test_model_failure_non_streamed(oai: openai.OpenAI, model: Served, http: httpx.Client) -> None:
    fail_model(model)
    with pytest.raises(openai.APIStatusError) as raised:
        oai.responses.create(model=MODEL, input="hi")
    assert raised.value.status_code == 502
    assert isinstance(raised.value.body, dict) and raised.value.body["code"] == "upstream_error"

    newest = newest_response(http)
    assert newest["id"] in raised.value.message
    stored = oai.responses.retrieve(newest["id"])
    assert stored.status == "failed"
    assert stored.error is not None and stored.error.code == "upstream_error"


def test_model_failure_streamed(oai: openai.OpenAI, model: Served) -> None:
    fail_model(model)
    events = list(oai.responses.create(model=MODEL, input="hi", stream=True))

    assert [e.type for e in events] == ["response.created", "response.in_progress", "response.failed"]
    assert_numbered(events)
    failed = events[-1].response
    assert failed.status == "failed"
    assert failed.error is not None and failed.error.code == "upstream_error" and failed.error.message
    stored = oai.responses.retrieve(failed.id)
    assert stored.status == "failed"
    assert stored.error is not None and stored.error.code == "upstream_error"


def test_model_failure_in_background(oai: openai.OpenAI, model: Served) -> None:
    fail_model(model)
    started = oai.responses.create(model=MODEL, input="hi", background=True)
    failed = settled(oai, model, started.id)
    assert failed.status == "failed"
    assert failed.error is not None and failed.error.code == "upstream_error"


def test_failed_response_leaves_its_conversation_usable(oai: openai.OpenAI, model: Served) -> None:
    conversation = oai.conversations.create()
    fail_model(model)
    with pytest.raises(openai.APIStatusError):
        oai.responses.create(model=MODEL, input="lost question", conversation=conversation.id)
    assert oai.conversations.items.list(conversation.id).data == []

    model.enqueue_text("answer")
    oai.responses.create(model=MODEL, input="question", conversation=conversation.id)
    assert [(m["role"], m["content"]) for m in model.requests()[-1]["messages"]] == [("user", "question")]


# ---- chains ----------------------------------------------------------------------------


def test_long_chain_carries_the_full_history(oai: openai.OpenAI, model: Served) -> None:
    """Thirty responses chained by ``previous_response_id``: each model request holds every earlier turn."""
    length = 30
    previous: str | None = None
    for n in range(length):
        model.enqueue(ScriptedReply(text=f"a{n}", chunks=1))
        response = oai.responses.create(
            model=MODEL, input=f"q{n}", previous_response_id=previous, instructions=f"turn {n}"
        )
        assert response.output_text == f"a{n}"
        previous = response.id

    requests = model.requests()
    assert [len(r["messages"]) for r in requests] == [2 + 2 * n for n in range(length)]
    last = requests[-1]["messages"]
    assert last[0] == {"role": "system", "content": f"turn {length - 1}"}
    expected = [(role, f"{prefix}{n}") for n in range(length) for role, prefix in (("user", "q"), ("assistant", "a"))]
    assert [(m["role"], m["content"]) for m in last[1:]] == expected[:-1]
