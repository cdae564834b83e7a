"""Tool-call grammars: valid GBNF for llama.cpp, and the calls each tool choice admits."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from embedded_support import shipped_model
from ferryman.errors import UpstreamError
from ferryman.inference.embedded import installed_runtimes
from ferryman.inference.llama_source import close_null_files_at_exit
from ferryman.inference.tool_grammar import answer_grammar, tool_call_grammar
from ferryman.inference.xllamacpp_source import XllamacppSource

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


def _llama_cpp_compiler(path: str) -> Iterator[Callable[[str], bool]]:
    import llama_cpp

    close_null_files_at_exit()
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)

    def compile_grammar(grammar: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, grammar.encode(), b"root")
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    yield compile_grammar
    llm.close()


def _xllamacpp_compiler(path: str) -> Iterator[Callable[[str], bool]]:
    source = XllamacppSource(path, n_ctx=256)
    source.load()

    def compile_grammar(grammar: str) -> bool:
        # xllamacpp has no grammar parser of its own to call: a one-token completion builds the sampler.
        try:
            list(source.stream({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "grammar": grammar}))
        except UpstreamError as exc:
            if "Failed to initialize samplers" in str(exc):
                return False
            raise
        return True

    yield compile_grammar
    source.close()


@pytest.fixture(scope="module", params=installed_runtimes() or ["xllamacpp"])
def compiles(request: pytest.FixtureRequest) -> Iterator[Callable[[str], bool]]:
    """Compile a grammar with each installed runtime's GBNF parser (llama.cpp's) over the SmolLM2 vocabulary."""
    compilers = {"xllamacpp": _xllamacpp_compiler, "llama-cpp-python": _llama_cpp_compiler}
    yield from compilers[request.param](shipped_model(request.param))


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
