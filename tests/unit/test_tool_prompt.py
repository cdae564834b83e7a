"""The prompted ``<tool_call>`` format: incremental parsing and history rendering."""

from __future__ import annotations

import itertools
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
from ferryman.inference.base import TextChunk, ToolCallChunk
from ferryman.inference.tool_prompt import (
    ToolCallParser,
    add_system_text,
    new_call_id,
    render_history,
    tool_system_prompt,
)


def _parser() -> ToolCallParser:
    counter = itertools.count(1)
    return ToolCallParser(call_id=lambda: f"call_{next(counter)}")


def _feed_all(parser: ToolCallParser, pieces: list[str]) -> list[list[TextChunk | ToolCallChunk]]:
    return [parser.feed(piece) for piece in pieces] + [parser.finish()]


def test_text_streams_and_tags_split_at_awkward_places_become_calls() -> None:
    parser = _parser()
    pieces = [
        "Let me check.",
        " <",
        "tool_",
        'call>{"name": "get_weather", "argu',
        'ments": {"city": "Paris"}}</tool',
        "_call",
        '>\n<tool_call>{"name": "get_time", "arguments": {}}<',
        "/tool_call> Done",
        ".",
    ]
    assert _feed_all(parser, pieces) == [
        [TextChunk("Let me check.")],
        [TextChunk(" ")],
        [],
        [],
        [],
        [],
        [
            ToolCallChunk(index=0, call_id="call_1", name="get_weather", arguments='{"city": "Paris"}'),
            TextChunk("\n"),
        ],
        [ToolCallChunk(index=1, call_id="call_2", name="get_time", arguments="{}"), TextChunk(" Done")],
        [TextChunk(".")],
        [],
    ]
    assert parser.calls == 2


def test_a_lone_angle_bracket_is_held_only_until_it_cannot_open_a_tag() -> None:
    parser = _parser()
    assert _feed_all(parser, ["1 <", " 2 <t", "able>", " x <tool"]) == [
        [TextChunk("1 ")],
        [TextChunk("< 2 ")],
        [TextChunk("<table>")],
        [TextChunk(" x ")],
        [TextChunk("<tool")],
    ]
    assert parser.calls == 0


def test_malformed_json_in_a_tag_is_passed_on_as_text() -> None:
    parser = _parser()
    assert _feed_all(parser, ['<tool_call>{"name": "f", "arguments": {</tool_call>ok']) == [
        [TextChunk('<tool_call>{"name": "f", "arguments": {</tool_call>ok')],
        [],
    ]
    assert parser.calls == 0


def test_a_json_object_without_a_name_is_text_and_string_arguments_pass_raw() -> None:
    parser = _parser()
    chunks = parser.feed(
        '<tool_call>{"arguments": {}}</tool_call><tool_call>{"name": "f", "arguments": "x=1"}</tool_call>'
    )
    assert chunks == [
        TextChunk('<tool_call>{"arguments": {}}</tool_call>'),
        ToolCallChunk(index=0, call_id="call_1", name="f", arguments="x=1"),
    ]


def test_a_list_of_calls_in_one_tag_is_several_calls() -> None:
    parser = _parser()
    body = json.dumps([{"name": "a", "arguments": {"n": 1}}, {"name": "b"}])
    assert parser.feed(f"<tool_call>{body}</tool_call>") == [
        ToolCallChunk(index=0, call_id="call_1", name="a", arguments='{"n": 1}'),
        ToolCallChunk(index=1, call_id="call_2", name="b", arguments="{}"),
    ]


def test_an_unclosed_tag_is_flushed_as_text_at_the_end() -> None:
    parser = _parser()
    assert _feed_all(parser, ['a<tool_call>{"name": "f"']) == [[TextChunk("a")], [TextChunk('<tool_call>{"name": "f"')]]


def test_call_ids_are_fresh() -> None:
    first, second = new_call_id(), new_call_id()
    assert first.startswith("call_") and first != second


def test_history_renders_tool_calls_and_results_in_template_roles() -> None:
    call = ToolCall(call_id="c1", tool_name="get_weather", arguments={"city": "Paris"})
    raw = ToolCall(call_id="c2", tool_name="f", arguments="not json")
    image = ImageContentItem(image=ImageSource(url=URL(uri="http://x/i.png")))
    messages: list[Message] = [
        SystemMessage(content="Be brief."),
        UserMessage(content=[TextContentItem(text="Weather?"), image]),
        CompletionMessage(content="Checking.", stop_reason="end_of_message", tool_calls=[call, raw]),
        ToolResponseMessage(call_id="c1", content="Sunny"),
        CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[call]),
    ]
    tag = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    assert render_history(messages) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": f'Checking.\n{tag}\n<tool_call>{{"name": "f", "arguments": "not json"}}</tool_call>',
        },
        {"role": "user", "content": "Tool result for call c1:\nSunny"},
        {"role": "assistant", "content": tag},
    ]


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
