"""Our messages and tools in the OpenAI chat-completions format."""

from __future__ import annotations

import orjson
import pytest

from ferryman.api.content import (
    URL,
    CompletionMessage,
    ImageContentItem,
    ImageSource,
    Message,
    SystemMessage,
    TextContentItem,
    ToolCall,
    ToolDef,
    ToolParameter,
    ToolResponseMessage,
    UserMessage,
)
from ferryman.inference import openai_wire
from ferryman.inference.openai_wire import (
    EncodedMessages,
    message_param,
    parse_arguments,
    tool_choice_param,
    tool_schema,
)


def test_tool_schema_maps_parameter_types_and_required() -> None:
    tool = ToolDef(
        name="f",
        description="d",
        parameters=[
            ToolParameter(name="n", parameter_type="int", description="count"),
            ToolParameter(name="flag", parameter_type="bool", required=False, default=True),
        ],
    )
    assert tool_schema(tool) == {
        "type": "function",
        "function": {
            "name": "f",
            "description": "d",
            "parameters": {
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "description": "count"},
                    "flag": {"type": "boolean", "default": True},
                },
                "required": ["n"],
            },
        },
    }


def test_assistant_tool_calls_and_tool_results() -> None:
    call = ToolCall(call_id="c1", tool_name="f", arguments={"a": 1})
    assistant = message_param(CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[call]))
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}],
    }
    assert message_param(ToolResponseMessage(call_id="c1", content="ok")) == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "ok",
    }


def test_user_content_items_and_context() -> None:
    image = ImageContentItem(image=ImageSource(url=URL(uri="http://x/y.png")))
    message = UserMessage(content=[TextContentItem(text="look"), image], context="ctx")
    assert message_param(message) == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "http://x/y.png"}},
            {"type": "text", "text": "ctx"},
        ],
    }
    assert message_param(UserMessage(content="hi", context="ctx")) == {"role": "user", "content": "hi\n\nctx"}


def test_tool_choice_and_arguments() -> None:
    assert tool_choice_param("auto", {"f"}) == "auto"
    assert tool_choice_param("f", {"f"}) == {"type": "function", "function": {"name": "f"}}
    assert tool_choice_param("auto", set()) is None
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("") == {}
    assert parse_arguments("not json") == "not json"


def _history() -> list[Message]:
    call = ToolCall(call_id="c1", tool_name="f", arguments={"a": 1})
    image = ImageContentItem(image=ImageSource(data="aGk="))
    return [
        SystemMessage(content="be brief"),
        UserMessage(content=[TextContentItem(text="look"), image], context="ctx"),
        CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[call]),
        ToolResponseMessage(call_id="c1", content=[TextContentItem(text="ok")]),
        CompletionMessage(content="done"),
    ]


def _sent(encoded: EncodedMessages, messages: list[Message]) -> bytes:
    return orjson.dumps({"messages": encoded.fragments(messages)})


def _uncached(messages: list[Message]) -> bytes:
    return orjson.dumps({"messages": [message_param(message) for message in messages]})


def test_encoded_messages_are_the_bytes_of_their_wire_forms_as_conversations_grow_and_change() -> None:
    encoded = EncodedMessages()
    history = _history()
    edited = history[4].model_copy(update={"content": "done, edited"})
    other = [SystemMessage(content="be brief"), *history[1:3]]
    requests = [
        history,
        [SystemMessage(content="be brief"), *history[1:], UserMessage(content="and now?")],  # the run, and more
        [*history[:4], edited, UserMessage(content="and now?")],  # a message rewritten: encoded again
        other,  # fewer messages than the run kept
        history[1:],  # no system message
        history[:1],
        [],
    ]
    for messages in requests:
        assert _sent(encoded, messages) == _uncached(messages)


def test_only_the_messages_a_conversation_adds_are_encoded(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Message] = []

    def counted(message: Message) -> dict[str, object]:
        made.append(message)
        return message_param(message)

    monkeypatch.setattr(openai_wire, "message_param", counted)
    encoded = EncodedMessages()
    history = _history()
    _sent(encoded, history)
    assert sorted(map(id, made)) == sorted(map(id, history))
    later = [SystemMessage(content="again"), *history[1:], UserMessage(content="and now?")]
    made.clear()
    assert _sent(encoded, later) == _uncached(later)
    assert sorted(map(id, made)) == sorted(map(id, [later[0], later[-1]]))


def test_the_runs_least_lately_sent_go_past_the_budget() -> None:
    encoded = EncodedMessages(budget=len(_uncached(_history())))
    first, second = _history(), _history()
    _sent(encoded, first)
    _sent(encoded, second)
    assert len(encoded) == 1
    assert _sent(encoded, first) == _uncached(first)
