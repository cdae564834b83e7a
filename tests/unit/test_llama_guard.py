"""Llama Guard 3 over a routed chat model: the prompt it is asked, and how its answers are read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ferryman.api.content import CompletionMessage, SystemMessage, ToolResponseMessage, UserMessage
from ferryman.api.safety import ShieldResource
from ferryman.errors import InvalidRequestError, UpstreamError
from ferryman.inference.router import ModelRouter
from ferryman.safety.llama_guard import LlamaGuardShield, build_prompt, parse_answer
from ferryman.testing import ScriptedModel
from inprocess import check_script

pytestmark = pytest.mark.anyio


@pytest.fixture()
def guard_model(request: pytest.FixtureRequest) -> Iterator[ScriptedModel]:
    model = ScriptedModel(model_ids=("guard-model",))
    yield model
    check_script(request, model.script)


def guard(model: ScriptedModel, **params: Any) -> LlamaGuardShield:
    resource = ShieldResource(
        identifier="guard", provider_id="llama-guard", provider_resource_id="guard-model", params=params
    )
    return LlamaGuardShield(resource, model)


def test_the_prompt_has_the_task_categories_conversation_and_instruction() -> None:
    prompt = build_prompt(
        [SystemMessage(content="be nice"), UserMessage(content="hi"), CompletionMessage(content="hello!")], {"S6"}
    )
    assert prompt.startswith("Task: Check if there is unsafe content in 'Agent' messages")
    assert "S1: Violent Crimes.\n" in prompt and "S14: Code Interpreter Abuse." in prompt
    assert "S6:" not in prompt
    assert "<BEGIN CONVERSATION>\n\nUser: hi\n\nAgent: hello!\n\n<END CONVERSATION>" in prompt
    assert "be nice" not in prompt
    assert "ONLY THE LAST Agent message" in prompt
    assert "First line must read 'safe' or 'unsafe'." in prompt


@pytest.mark.parametrize(
    ("answer", "codes"),
    [("safe", None), ("  safe\n", None), ("unsafe\nS1", ["S1"]), ("unsafe\nS1,S10", ["S1", "S10"]),
     ("UNSAFE\n s2 , S14 ", ["S2", "S14"]), ("unsafe", [])],
)  # fmt: skip
def test_answers_in_the_format_are_read(answer: str, codes: list[str] | None) -> None:
    assert parse_answer(answer) == codes


@pytest.mark.parametrize("answer", ["", "I think it is fine", "unsafe\nS15", "safe\nS1", "unsafe\nviolence"])
def test_anything_else_raises(answer: str) -> None:
    with pytest.raises(UpstreamError):
        parse_answer(answer)


async def test_safe_is_no_violation_and_the_model_gets_the_prompt(guard_model: ScriptedModel) -> None:
    guard_model.enqueue_text("safe")
    verdict = await guard(guard_model).run([UserMessage(content="What is 2+2?")], {})
    assert verdict.violation is None and verdict.redacted is None
    [sent] = guard_model.requests
    assert sent["model"] == "guard-model"
    assert "User: What is 2+2?" in sent["messages"][0]["content"]


async def test_unsafe_is_an_error_with_the_codes(guard_model: ScriptedModel) -> None:
    guard_model.enqueue_text("unsafe\nS1,S10")
    verdict = await guard(guard_model).run([UserMessage(content="bad")], {})
    violation = verdict.violation
    assert violation is not None and violation.violation_level == "error"
    assert violation.user_message == "I can't answer that. Can I help with something else?"
    assert violation.metadata == {"violation_type": "S1,S10", "categories": ["Violent Crimes", "Hate"]}


async def test_excluded_categories_are_not_violations(guard_model: ScriptedModel) -> None:
    guard_model.enqueue_text("unsafe\nS6")
    verdict = await guard(guard_model, excluded_categories=["Specialized Advice"]).run(
        [UserMessage(content="dose?")], {}
    )
    assert verdict.violation is None
    assert "S6:" not in guard_model.requests[0]["messages"][0]["content"]


async def test_a_garbled_answer_or_a_failing_model_raises(guard_model: ScriptedModel) -> None:
    guard_model.enqueue_text("Sure! Here is my assessment")
    with pytest.raises(UpstreamError):
        await guard(guard_model).run([UserMessage(content="x")], {})
    guard_model.enqueue_error(500)
    with pytest.raises(UpstreamError):
        await guard(guard_model).run([UserMessage(content="x")], {})


async def test_nothing_to_judge_asks_nothing(guard_model: ScriptedModel) -> None:
    verdict = await guard(guard_model).run([ToolResponseMessage(call_id="c", content="42")], {})
    assert verdict.violation is None


def test_unknown_excluded_categories_are_refused() -> None:
    with pytest.raises(InvalidRequestError):
        guard(ScriptedModel(), excluded_categories=["S99"])


async def test_unsafe_naming_no_category_still_blocks(guard_model: ScriptedModel) -> None:
    guard_model.enqueue_text("unsafe")
    verdict = await guard(guard_model).run([UserMessage(content="x")], {})
    assert verdict.violation is not None and verdict.violation.violation_level == "error"


async def test_a_model_that_is_gone_is_a_failing_shield_not_a_404() -> None:
    resource = ShieldResource(identifier="guard", provider_id="llama-guard", provider_resource_id="gone-model")
    with pytest.raises(UpstreamError, match="not available"):
        await LlamaGuardShield(resource, ModelRouter([ScriptedModel()])).run([UserMessage(content="x")], {})
