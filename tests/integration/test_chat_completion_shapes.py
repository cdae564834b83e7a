"""``/v1/chat/completions`` served by a provider of ours: a malformed message, tool or format is a 400 naming it.

The adapter read OpenAI's request as plain dicts: an assistant message with a
tool call of no ``id``, a user part that is a number, a tool whose ``function``
is a string each raised in it, and the caller got a 500. Well-formed requests
reach the model as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st
from starlette.testclient import TestClient

from ferryman.server.app import build_services, create_app
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel, ScriptedReply
from ferryman.testing.scripted import Script
from inprocess import migrated_sqlite

MODEL = "scripted-model"
HELLO = {"role": "user", "content": "hi"}


@pytest.fixture(scope="module")
def model() -> ScriptedModel:
    return ScriptedModel(script=Script(default_reply=ScriptedReply(text="answered")))


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory, model: ScriptedModel) -> Iterator[TestClient]:
    db = migrated_sqlite(tmp_path_factory.mktemp("chat-shapes") / "chat.db")
    with TestClient(create_app(build_services(SqliteStore(db), [model]))) as client:
        yield client


def _complete(http: TestClient, **fields: Any) -> Any:
    return http.post("/v1/chat/completions", json={"model": MODEL, **fields})


MALFORMED: list[tuple[dict[str, Any], str]] = [
    ({"messages": [{"role": "assistant", "tool_calls": [{}]}]}, "messages.0.tool_calls.0.id"),
    ({"messages": [{"role": "user", "content": [1]}]}, "messages.0.content.0"),
    ({"messages": [HELLO], "tools": [{"type": "function", "function": "x"}]}, "tools.0.function"),
    (
        {"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": None}]}]},
        "messages.0.tool_calls.0.function",
    ),
    ({"messages": [{"role": "assistant", "tool_calls": "calls"}]}, "messages.0.tool_calls"),
    (
        {"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {}}}]}]},
        "messages.0.tool_calls.0.function.arguments",
    ),
    (
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "http://x"}]}]},
        "messages.0.content.0.image_url",
    ),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages.0.content.0.image_url"),
    ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages.0.content.0.text"),
    ({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "messages.0.content.0.type"),
    ({"messages": [{"role": "user", "content": {"text": "hi"}}]}, "messages.0.content"),
    ({"messages": [{"role": "system", "content": [None]}]}, "messages.0.content.0"),
    ({"messages": [{"role": "tool", "content": "sunny"}]}, "messages.0.tool_call_id"),
    ({"messages": [{"role": "tool", "tool_call_id": 7, "content": "sunny"}]}, "messages.0.tool_call_id"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages.0.role"),
    ({"messages": [{"content": "hi"}]}, "messages.0.role"),
    ({"messages": [HELLO], "tools": [{}]}, "tools.0.type"),
    ({"messages": [HELLO], "tools": [{"type": "function"}]}, "tools.0.function"),
    ({"messages": [HELLO], "tools": [{"type": "function", "function": {"parameters": {}}}]}, "tools.0.function.name"),
    (
        {"messages": [HELLO], "tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]},
        "tools.0.function.parameters",
    ),
    ({"messages": [HELLO], "tool_choice": {"type": "function", "function": "f"}}, "tool_choice.function"),
    ({"messages": [HELLO], "tool_choice": 3}, "tool_choice"),
    (
        {"messages": [HELLO], "response_format": {"type": "json_schema", "json_schema": "x"}},
        "response_format.json_schema",
    ),
    (
        {"messages": [HELLO], "response_format": {"type": "json_schema", "json_schema": {"schema": []}}},
        "response_format.json_schema.schema",
    ),
    ({"messages": [HELLO], "response_format": "json"}, "response_format"),
    ({"messages": [HELLO], "stop": 5}, "stop"),
    ({"messages": [HELLO], "stop": [None]}, "stop.0"),
    ({"messages": [HELLO], "temperature": "hot"}, "temperature"),
    ({"messages": [HELLO], "top_k": [1]}, "top_k"),
]


@pytest.mark.parametrize(("fields", "field"), MALFORMED, ids=[field for _, field in MALFORMED])
def test_a_malformed_shape_is_a_400_naming_its_field(http: TestClient, fields: dict[str, Any], field: str) -> None:
    for stream in (False, True):
        refused = _complete(http, stream=stream, **fields)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert (error["code"], error["field"]) == ("invalid_request", field)
        assert f"invalid field '{field}'" in error["message"]


def test_a_well_formed_request_reaches_the_model_as_before(http: TestClient, model: ScriptedModel) -> None:
    model.script.requests.clear()
    answered = _complete(
        http,
        messages=[
            {"role": "developer", "content": [{"type": "text", "text": "be "}, {"type": "text", "text": "brief"}]},
            {
                "role": "user",
                "name": "bob",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
                    {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
                    {"id": "c2", "type": "function", "function": {"name": "clock", "arguments": ""}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "sunny"}]},
            {"role": "tool", "tool_call_id": "c2", "content": "noon"},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}, {"type": "refusal", "refusal": "no"}]},
        ],
        tools=[
            {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}, "strict": True}},
            {"type": "web_search"},
        ],
        tool_choice={"type": "function", "function": {"name": "weather"}},
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
        temperature=0.5,
        top_p=0.9,
        top_k=40,
        max_tokens=12,
        stop="END",
        seed=3,
    )
    assert answered.status_code == 200, answered.text
    [request] = model.requests
    assert request == {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "be brief"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image", "image": {"data": None, "url": {"uri": "https://example.com/a.png"}}},
                ],
                "context": None,
            },
            {
                "role": "assistant",
                "content": "",
                "stop_reason": "end_of_message",
                "tool_calls": [
                    {
                        "call_id": "c1",
                        "tool_name": "weather",
                        "arguments": {"city": "Paris"},
                        "arguments_json": '{"city": "Paris"}',
                    },
                    {"call_id": "c2", "tool_name": "clock", "arguments": {}, "arguments_json": "{}"},
                ],
            },
            {"role": "tool", "call_id": "c1", "content": "sunny"},
            {"role": "tool", "call_id": "c2", "content": "noon"},
            {"role": "assistant", "content": "ok", "stop_reason": "end_of_turn", "tool_calls": []},
        ],
        "tools": ["weather"],
        "tool_choice": "weather",
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 40,
        "max_tokens": 12,
        "stop": ["END"],
        "response_format": {"type": "json_schema", "json_schema": {"type": "object"}, "name": None, "strict": None},
    }


# ---- fuzzing: the request's own shapes, each field of any JSON value too --------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_text = st.text(max_size=6)


def _fields(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """An object with any of these fields, each of its own shape or (now and then) of any JSON value."""
    return st.fixed_dictionaries(
        {}, optional={name: st.one_of(strategy, strategy, _json) for name, strategy in fields.items()}
    )


def _object(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """As :func:`_fields`, or (now and then) any JSON value instead of the object."""
    return st.one_of(_fields(**fields), _fields(**fields), _json)


_part = _object(type=st.sampled_from(["text", "image_url", "input_audio"]), text=_text, image_url=_object(url=_text))
_content = _text | st.lists(_part, max_size=3)
_call = _object(id=_text, type=st.just("function"), function=_object(name=_text, arguments=_text))
_message = _fields(
    role=st.sampled_from(["system", "developer", "user", "assistant", "tool"]),
    content=_content,
    tool_calls=st.lists(_call, max_size=2),
    tool_call_id=_text,
)
_tool = _object(
    type=st.sampled_from(["function", "web_search"]),
    function=_object(name=_text, description=_text, parameters=st.dictionaries(_text, _json, max_size=2)),
)
_format = _object(
    type=st.sampled_from(["text", "json_object", "json_schema"]),
    json_schema=_object(name=_text, schema=st.dictionaries(_text, _json, max_size=2)),
)
_bodies = st.fixed_dictionaries(
    {"model": st.just(MODEL), "messages": st.lists(_message, min_size=1, max_size=3)},
    optional={
        "tools": st.lists(_tool, max_size=2) | _json,
        "tool_choice": st.sampled_from(["auto", "none", "required"]) | _object(function=_object(name=_text)),
        "response_format": _format,
        "stop": _text | st.lists(_text, max_size=2) | _json,
        "temperature": st.floats(0, 2) | _json,
        "top_p": st.floats(0, 1) | _json,
        "top_k": st.integers(0, 100) | _json,
    },
)


@hypothesis.given(body=_bodies)
@hypothesis.settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture, hypothesis.HealthCheck.too_slow],
)
def test_no_request_shape_is_a_server_error(http: TestClient, body: dict[str, Any]) -> None:
    answered = http.post("/v1/chat/completions", json=body)
    assert answered.status_code in (200, 400), answered.text
    if answered.status_code == 400:
        assert answered.json()["error"]["code"] == "invalid_request", answered.text
