"""How a history is fitted to the model's context: what truncation drops, what compaction replaces."""

from __future__ import annotations

import random

import pytest

from ferryman.api.content import CompletionMessage, Message, ToolCall, ToolResponseMessage, UserMessage
from ferryman.engine.context_fit import ContextPolicy, cut_points, fit_history, since_last_summary, summary_message
from ferryman.engine.plan import TurnPlan
from ferryman.engine.summary import summarize
from ferryman.errors import ContextLengthExceededError
from ferryman.inference.base import Sampling
from ferryman.inference.router import ModelRouter
from ferryman.testing import ScriptedModel

pytestmark = pytest.mark.anyio

WORDS = "word " * 60  # 50 tokens by the estimate


def _plan(strategy: str = "truncation") -> TurnPlan:
    return TurnPlan(
        "scripted-model",
        "",
        Sampling(),
        None,
        None,
        10,
        {},
        {},
        [],
        [],
        context=ContextPolicy(strategy),  # type: ignore[arg-type]
    )


def _exchange(number: int) -> list[Message]:
    call = ToolCall(call_id=f"c{number}", tool_name="look", arguments={}, arguments_json="{}")
    return [
        UserMessage(content=f"{number} {WORDS}"),
        CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[call]),
        ToolResponseMessage(call_id=f"c{number}", content=WORDS),
        CompletionMessage(content=f"answer {number}", stop_reason="end_of_turn"),
    ]


async def _router(context: int) -> ModelRouter:
    router = ModelRouter([ScriptedModel(context_length=context)])
    await router.refresh()
    return router


async def test_truncation_drops_whole_exchanges_oldest_first_and_never_a_call_without_its_result() -> None:
    history = [message for number in range(10) for message in _exchange(number)]
    plan = _plan()
    fitted = await fit_history(await _router(500), plan.chat_request, history, plan.context)
    assert isinstance(fitted.history[0], UserMessage)
    assert fitted.history == history[-len(fitted.history) :]
    assert fitted.note is not None and fitted.note.dropped_messages == len(history) - len(fitted.history) > 0
    assert fitted.note.prompt_tokens is not None and fitted.note.prompt_tokens <= 500 - 64


async def test_a_turn_longer_than_the_context_keeps_its_question_and_newest_round() -> None:
    rounds: list[Message] = [UserMessage(content="the question")]
    for number in range(12):
        call = ToolCall(call_id=f"c{number}", tool_name="look", arguments={}, arguments_json="{}")
        rounds += [
            CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[call]),
            ToolResponseMessage(call_id=f"c{number}", content=WORDS),
        ]
    plan = _plan()
    fitted = await fit_history(await _router(300), plan.chat_request, rounds, plan.context)
    assert fitted.history[0] == rounds[0] and fitted.history[-2:] == rounds[-2:]
    kept_calls = {m.tool_calls[0].call_id for m in fitted.history if isinstance(m, CompletionMessage) and m.tool_calls}
    kept_results = {m.call_id for m in fitted.history if isinstance(m, ToolResponseMessage)}
    assert kept_calls == kept_results and len(kept_calls) < 12


async def test_disabled_refuses_and_a_prompt_no_strategy_can_fit_is_refused_naming_the_context() -> None:
    history = [message for number in range(10) for message in _exchange(number)]
    disabled = _plan("disabled")
    with pytest.raises(ContextLengthExceededError):
        await fit_history(await _router(500), disabled.chat_request, history, disabled.context)
    plan = _plan()
    with pytest.raises(ContextLengthExceededError, match="context is 100 tokens"):
        await fit_history(await _router(100), plan.chat_request, [UserMessage(content=WORDS * 3)], plan.context)


async def test_compaction_summarizes_what_it_replaces_and_later_fits_start_from_the_summary() -> None:
    history = [message for number in range(10) for message in _exchange(number)]
    summarized: list[list[Message]] = []

    async def summarize(messages: list[Message]) -> str:
        summarized.append(messages)
        return "they looked things up"

    plan = _plan("compaction")
    fitted = await fit_history(await _router(500), plan.chat_request, history, plan.context, summarize)
    assert fitted.history[0] == summary_message("they looked things up")
    assert summarized == [history[: len(history) - len(fitted.history) + 1]]
    assert fitted.note is not None and fitted.note.summarized_messages == len(summarized[0])
    assert since_last_summary([*history, *fitted.history]) == fitted.history


def _newest_summary_on(history: list[Message]) -> list[Message]:
    """``since_last_summary`` as it was: every message read, newest first."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, CompletionMessage) and isinstance(message.content, str):
            if message.content.startswith("[Summary of the earlier conversation"):
                return history[index:]
    return history


def test_since_last_summary_answers_as_reading_every_message_would_while_histories_grow_and_change() -> None:
    shuffled = random.Random(7)
    sessions: list[list[Message]] = [[UserMessage(content="first")] for _ in range(3)]
    for _ in range(400):
        history = shuffled.choice(sessions)
        change = shuffled.random()
        if change < 0.6:  # a turn: its messages appended, a summary among them now and then
            history += _exchange(shuffled.randrange(9))[: shuffled.randint(1, 4)]
            if shuffled.random() < 0.1:
                history.append(summary_message("so far"))
        elif change < 0.75 and len(history) > 1:  # a message rewritten in place (a redaction), maybe as a summary
            at = shuffled.randrange(1, len(history))
            history[at] = summary_message("now") if shuffled.random() < 0.5 else UserMessage(content="[redacted]")
        elif change < 0.85:  # fewer messages read (compaction replaced the turn's own)
            del history[shuffled.randint(1, len(history)) :]
        read = list(history)  # each read is a list of its own, as the store returns it
        assert since_last_summary(read) == _newest_summary_on(read)
        assert (since_last_summary(read) is read) == (_newest_summary_on(read) is read)
    assert since_last_summary([]) == []


def test_cut_points_are_user_messages_then_the_newest_exchanges_rounds() -> None:
    history = [*_exchange(0), *_exchange(1)]
    assert cut_points(history) == [4, 7]  # the second exchange, then its answer's round


async def test_a_summary_request_fits_its_model_and_asks_for_an_eighth_of_the_context_at_most() -> None:
    model = ScriptedModel(context_length=512)
    router = ModelRouter([model])
    await router.refresh()
    history = [message for number in range(10) for message in _exchange(number)]
    model.enqueue_text("they looked things up")
    made = await summarize(router, "scripted-model", history)
    assert made.text == "they looked things up"
    [request] = model.script.requests
    assert request["max_tokens"] == 512 // 8
    said = request["messages"][-1]["content"]
    assert said.startswith(("user: ", "assistant: ", "tool result: "))  # the oldest part left out, whole lines
    assert said.endswith("assistant: answer 9") and "user: 0 " not in said
    assert model.script.overflows == []
