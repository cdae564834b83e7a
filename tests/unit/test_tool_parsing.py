"""Reading tool calls out of streamed text: every form small models emit, split anywhere."""

from __future__ import annotations

import itertools
import json

import pytest

from ferryman.inference.base import TextChunk, ToolCallChunk
from ferryman.inference.tool_parsing import MAX_NESTING, ParsedChunk, ToolCallParser, function_call_of, new_call_id

OFFERED = ("get_weather", "calculator")


def _parser(names: tuple[str, ...] = OFFERED) -> ToolCallParser:
    counter = itertools.count(1)
    return ToolCallParser(names, call_id=lambda: f"call_{next(counter)}")


def _feed_all(parser: ToolCallParser, pieces: list[str]) -> list[list[ParsedChunk]]:
    return [parser.feed(piece) for piece in pieces] + [parser.finish()]


def _joined(parser: ToolCallParser, text: str, size: int) -> list[ParsedChunk]:
    """Feed ``text`` in pieces of ``size`` characters; merge the text chunks of the result."""
    chunks = [
        chunk for piece in _feed_all(parser, [text[i : i + size] for i in range(0, len(text), size)]) for chunk in piece
    ]
    merged: list[ParsedChunk] = []
    for chunk in chunks:
        if isinstance(chunk, TextChunk) and merged and isinstance(merged[-1], TextChunk):
            merged[-1] = TextChunk(merged[-1].text + chunk.text)
        else:
            merged.append(chunk)
    return merged


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


WEATHER_CALL = ToolCallChunk(index=0, call_id="call_1", name="get_weather", arguments='{"city": "Paris"}')


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'Sure. {"name": "get_weather", "arguments": {"city": "Paris"}} ok',
            [TextChunk("Sure. "), WEATHER_CALL, TextChunk(" ok")],
        ),
        ('{"name": "get_weather", "parameters": {"city": "Paris"}}', [WEATHER_CALL]),
        ('{"tool": "get_weather", "arguments": {"city": "Paris"}}', [WEATHER_CALL]),
        ('{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}', [WEATHER_CALL]),
        ('```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n', [WEATHER_CALL, TextChunk("\n")]),
        ('```\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n```', [WEATHER_CALL]),
        ('I will call get_weather(city="Paris").', [TextChunk("I will call "), WEATHER_CALL, TextChunk(".")]),
    ],
    ids=["bare", "parameters", "tool-key", "openai", "fenced", "fenced-tag", "function-syntax"],
)
@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_each_form_is_a_call_whatever_the_chunking(text: str, expected: list[ParsedChunk], size: int) -> None:
    parser = _parser()
    assert _joined(parser, text, size) == expected
    assert parser.calls == 1


@pytest.mark.parametrize(
    "text",
    [
        'The user is {"name": "Ada", "arguments": {"x": 1}} in our records.',
        'Config: ```json\n{"name": "search", "arguments": {}}\n``` as shown.',
        "```python\nprint({'a': 1})\n```",
        "Sets like {1, 2} and {x} and maps {} are fine; a < b and c > d.",
        "We recalculator(x=1) and obj.calculator(x=2) and calculator(1 + 1) stay text.",
        "An open brace { never closed",
        "calculator(expression=",
    ],
)
@pytest.mark.parametrize("size", [1, 5, 1000])
def test_prose_with_json_naming_no_offered_tool_stays_text(text: str, size: int) -> None:
    parser = _parser()
    assert _joined(parser, text, size) == [TextChunk(text)]
    assert parser.calls == 0


def test_text_before_a_possible_call_streams_at_once() -> None:
    parser = _parser()
    assert parser.feed("The weather in Paris is") == [TextChunk("The weather in Paris is")]
    assert parser.feed(" see calcu") == [TextChunk(" see ")]
    assert parser.feed("s") == [TextChunk("calcus")]


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
    text = '<tool_call>{"name": "f", "arguments": {</tool_call>ok'
    assert _joined(parser, text, 1000) == [TextChunk(text)]
    assert parser.calls == 0


def test_a_tag_is_a_call_whatever_the_name_and_string_arguments_pass_raw() -> None:
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


def test_without_offered_tools_only_tags_are_calls() -> None:
    parser = _parser(())
    text = '{"name": "get_weather", "arguments": {}} get_weather(city="x")'
    assert _joined(parser, text, 4) == [TextChunk(text)]


def test_an_unclosed_tag_is_flushed_as_text_at_the_end() -> None:
    parser = _parser()
    assert _feed_all(parser, ['a<tool_call>{"name": "f"']) == [[TextChunk("a")], [TextChunk('<tool_call>{"name": "f"')]]


def test_function_syntax_needs_literal_keyword_arguments() -> None:
    assert function_call_of('calculator(expression="2 * 3", digits=2)') == (
        "calculator",
        {"expression": "2 * 3", "digits": 2},
    )
    assert function_call_of("calculator(2 * 3)") is None
    assert function_call_of("calculator(expression=x)") is None
    assert function_call_of("calculator(**kw)") is None


def test_call_ids_are_fresh() -> None:
    first, second = new_call_id(), new_call_id()
    assert first.startswith("call_") and first != second


def test_a_function_call_opening_the_output_is_a_call() -> None:
    parser = _parser()
    assert _joined(parser, 'get_weather(city="Paris")', 4) == [WEATHER_CALL]


@pytest.mark.parametrize(
    "text",
    [
        'Try calculator(expression=b"2+2") here.',  # a bytes literal: no JSON for it
        "Try calculator(expression={1, 2}) here.",
        "Try calculator(expression={[1]: 2}) here.",
        "Try calculator(expression=1e999) here.",
        '{"name": "calculator", "arguments": {"x": NaN}}',
        '{"name": "calculator", "arguments": {"x": ' + "1" * 5000 + "}}",
        '{"name": "calculator", "arguments": ' + '{"a": ' * 1200 + "1" + "}" * 1201,
        "<tool_call>" + "[" * 3000 + "]" * 3000 + "</tool_call>",
    ],
    ids=["bytes", "set", "unhashable-key", "infinity", "nan", "huge-int", "deep-object", "deep-tag"],
)
def test_output_that_no_json_can_carry_stays_text_and_never_raises(text: str) -> None:
    parser = _parser()
    assert _joined(parser, text, 1000) == [TextChunk(text)]
    assert parser.calls == 0


def test_the_nesting_bound_is_the_parsers_own_on_every_python() -> None:
    """Arguments ``MAX_NESTING`` deep are a call, one level deeper text (json alone stops near 1000 on 3.11 only)."""

    def call(depth: int) -> str:  # the call object itself is the first level
        return '{"name": "calculator", "arguments": ' + '{"a": ' * (depth - 1) + "1" + "}" * depth

    assert [type(chunk) for chunk in _joined(_parser(), call(MAX_NESTING), 1000)] == [ToolCallChunk]
    deeper = call(MAX_NESTING + 1)
    assert _joined(_parser(), deeper, 1000) == [TextChunk(deeper)]
    # Brackets inside strings are text, not nesting.
    in_strings = call(2).replace("1", '"' + "[" * 500 + '"')
    assert [type(chunk) for chunk in _joined(_parser(), in_strings, 1000)] == [ToolCallChunk]
