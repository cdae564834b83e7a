"""Offering tools to a local model: the prompted format, native templates, and rendering tool results."""

from __future__ import annotations

import json

from ferryman.api.content import (
    URL,
    CompletionMessage,
    ImageContentItem,
    ImageSource,
    Message,
    SystemMessage,
    TextContentItem,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from ferryman.inference.tool_prompt import add_system_text, render_history, template_has_tools, tool_system_prompt


def _history() -> list[Message]:
    call = ToolCall(call_id="c1", tool_name="get_weather", arguments={"city": "Paris"})
    raw = ToolCall(call_id="c2", tool_name="f", arguments="not json")
    image = ImageContentItem(image=ImageSource(url=URL(uri="http://x/i.png")))
    return [
        SystemMessage(content="Be brief."),
        UserMessage(content=[TextContentItem(text="Weather?"), image]),
        CompletionMessage(content="Checking.", stop_reason="end_of_message", tool_calls=[call, raw]),
        ToolResponseMessage(call_id="c1", content="Sunny"),
        CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[call]),
    ]


def test_history_renders_tool_calls_and_results_in_template_roles() -> None:
    tag = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    assert render_history(_history()) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": f'Checking.\n{tag}\n<tool_call>{{"name": "f", "arguments": "not json"}}</tool_call>',
        },
        {
            "role": "user",
            "content": 'The answer from get_weather is: Sunny\nReply to my question "Weather?" in one sentence, '
            "using this answer.",
        },
        {"role": "assistant", "content": tag},
    ]


def test_a_tool_result_names_the_tool_and_never_the_call_id() -> None:
    call = ToolCall(call_id="call_9f8e7d", tool_name="calculator", arguments={"expression": "2+2"})
    messages: list[Message] = [
        CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[call]),
        ToolResponseMessage(call_id="call_9f8e7d", content="4"),
        ToolResponseMessage(call_id="unknown", content="5"),
    ]
    rendered = render_history(messages)
    assert rendered[1] == {"role": "user", "content": "The answer from calculator is: 4\nAnswer my question using it."}
    assert rendered[2]["content"].startswith("The answer from the tool is: 5")
    assert all("call_9f8e7d" not in message["content"] for message in rendered[1:])


def test_native_history_keeps_tool_roles_with_arguments_as_objects() -> None:
    rendered = render_history(_history(), native=True)
    assert rendered[2]["tool_calls"][0] == {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
    }
    assert rendered[2]["tool_calls"][1]["function"]["arguments"] == "not json"
    assert rendered[3] == {"role": "tool", "tool_call_id": "c1", "content": "Sunny"}
    assert rendered[1] == {"role": "user", "content": "Weather?"}


def test_only_templates_that_mention_tools_render_them() -> None:
    assert template_has_tools("{% if tools %}{{ tools | tojson }}{% endif %}{{ messages }}")
    assert not template_has_tools("{% for message in messages %}{{ message.content }}{% endfor %}")
    assert not template_has_tools(None)


def test_tool_prompt_lists_schemas_and_the_format() -> None:
    schema = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    prompt = tool_system_prompt([schema], "required")
    assert json.dumps(schema) in prompt
    assert '<tool_call>{"name": "<tool name>", "arguments": {<arguments as a JSON object>}}</tool_call>' in prompt
    assert "You must call at least one tool." in prompt
    assert "You must call the tool f." in tool_system_prompt([schema], "f")


def test_tool_prompt_joins_the_first_system_message_or_becomes_one() -> None:
    user = {"role": "user", "content": "hi"}
    assert add_system_text([user], "T") == [{"role": "system", "content": "T"}, user]
    assert add_system_text([{"role": "system", "content": "S"}, user], "T") == [
        {"role": "system", "content": "S\n\nT"},
        user,
    ]
