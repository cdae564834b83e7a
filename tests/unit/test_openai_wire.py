"""Our messages and tools in the OpenAI chat-completions format."""

from __future__ import annotations

from ferryman.api.content import (
    URL,
    CompletionMessage,
    ImageContentItem,
    ImageSource,
    TextContentItem,
    ToolCall,
    ToolDef,
    ToolParameter,
    ToolResponseMessage,
    UserMessage,
)
from ferryman.inference.openai_wire import message_param, parse_arguments, tool_choice_param, tool_schema


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
