"""Keeping a prompt within the model's context: the oldest history dropped, or summarized, until it fits.

A turn's prompt is the plan's system message, then the history, then the tools. When that is longer than the
model's context (less the room kept for the answer, :func:`~ferryman.inference.context.check_context`'s
arithmetic), a strategy shortens the history the model reads; the stored history is never changed by it:

- ``truncation`` drops the oldest messages, whole exchanges first (from one user message to the next), then,
  when the newest exchange alone is too long, its oldest tool rounds (a call and its results go together), so
  that the model never reads a tool result without its call. The newest user message and the newest round
  are always kept: what cannot fit with them is refused as before.
- ``compaction`` puts a summary (:mod:`.summary`) in place of what truncation would drop, and of more: it
  keeps only what fits in half the threshold, so that a summary is not made again at the next turn. It runs
  once the prompt passes ``compact_threshold`` tokens (or, without one, the context).
- ``disabled`` refuses the prompt (``context_length_exceeded``), as before.

What was dropped or summarized is said in :class:`ContextNote` (the inference step shows it). The history
fitted is what shields already judged: a blocked input stands in it as its placeholder, never as sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from operator import is_
from typing import Literal

from ferryman.api.agents import ContextNote
from ferryman.api.content import CompletionMessage, Message, UserMessage, content_to_text
from ferryman.inference.base import ChatRequest, ContextWindow
from ferryman.inference.context import ANSWER_TOKENS, ContextModel, check_context

Strategy = Literal["truncation", "compaction", "disabled"]

SUMMARY_HEADER = "[Summary of the earlier conversation, which this message replaces]"
"""How a summary made by compaction begins: the history before such a message is never read again."""
MAX_CHARS_PER_TOKEN = 16
"""More characters than any tokenizer gives one token of ordinary text: history past this many characters per
token of the budget is never counted (see ``_recent``)."""


@dataclass(frozen=True)
class ContextPolicy:
    """How a turn keeps its prompt within the model's context.

    Attributes:
        strategy: ``truncation`` (the default), ``compaction`` or ``disabled`` (see the module's text).
        compact_threshold: Prompt tokens above which compaction runs (None: the context's budget).
    """

    strategy: Strategy = "truncation"
    compact_threshold: int | None = None


Summarize = Callable[[list[Message]], Awaitable[str]]
"""Makes the summary text of messages (compaction's; see :mod:`.summary`)."""


@dataclass(frozen=True)
class Fitted:
    """A history as the model will read it, and what was left out of it (None: nothing)."""

    history: list[Message]
    note: ContextNote | None = None
    request: ChatRequest | None = None
    """The request of ``history``, when fitting built it (None: build it)."""


def summary_message(text: str) -> CompletionMessage:
    """The message a summary stands in the history as."""
    return CompletionMessage(content=f"{SUMMARY_HEADER}\n{text}", stop_reason="end_of_turn", tool_calls=[])


def since_last_summary(history: list[Message]) -> list[Message]:
    """The history from its newest compaction summary on (all of it when it holds none)."""
    index = _SCANS.newest_summary(history)
    return history if index < 0 else history[index:]


class _Scans:
    """Where the newest summary stands in the histories read lately, by the object of their first message.

    Without a known context, every inference reads its whole history for a summary. A session's history is
    mostly the last one read and a few messages more, the same objects (the store hands back the messages it
    decoded before, and never changes one): only the messages past the part read before, object for object,
    are read. The oldest histories are forgotten once ``capacity`` are kept (each holds its messages).
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._read: dict[int, tuple[list[Message], int]] = {}

    def newest_summary(self, history: list[Message]) -> int:
        """The index of the newest summary in ``history`` (-1: none)."""
        if not history:
            return -1
        key = id(history[0])  # the entry holds that message: the id is no other's while it stands
        known, found = self._read.pop(key, ([], -1))
        if len(known) > len(history) or not all(map(is_, known, history)):
            known, found = [], -1
        for index in range(len(history) - 1, len(known) - 1, -1):
            if _is_summary(history[index]):
                found = index
                break
        self._read[key] = (history.copy(), found)
        if len(self._read) > self._capacity:
            del self._read[next(iter(self._read))]
        return found


_SCANS = _Scans(capacity=64)


def opens_with_summary(history: list[Message]) -> bool:
    """Whether a fitted history starts with a compaction summary (one too long to fit is dropped again)."""
    return bool(history) and _is_summary(history[0])


def _is_summary(message: Message) -> bool:
    # Runs over the history on every inference: the cheap tests first (a summary's content is a string).
    content = message.content
    return type(content) is str and content.startswith(SUMMARY_HEADER) and isinstance(message, CompletionMessage)


def _length(message: Message) -> int:
    content = message.content
    return len(content) if type(content) is str else len(content_to_text(content))


def _recent(history: list[Message], chars: int) -> tuple[int, bool]:
    """Where the part of the history worth counting starts, and whether a summary starts it.

    From the newest message back: the newest summary, or (past ``chars`` characters, more than any prompt
    of the budget holds at :data:`MAX_CHARS_PER_TOKEN`) the next user message on, else the newest user
    message. What lies before is dropped unseen: counting it on every turn would make a long session's turns
    ever slower.
    """
    total = 0
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if _is_summary(message):
            return index, True
        total += _length(message)
        if total > chars:
            later = next((i for i in range(index + 1, len(history)) if isinstance(history[i], UserMessage)), None)
            return (later if later is not None else max(_anchor(history), 0)), False
    return 0, False


def _anchor(history: list[Message]) -> int:
    """The index of the newest user message (-1: none)."""
    return next((i for i in range(len(history) - 1, -1, -1) if isinstance(history[i], UserMessage)), -1)


def cut_points(history: list[Message]) -> list[int]:
    """Where the history may start, oldest first: at each user message, then at each round of the newest exchange.

    A start at index ``i`` keeps ``history[i:]``; a start inside the newest exchange keeps its user message too
    (see :func:`kept`). The newest round (the model's calls and their results) is never cut.
    """
    anchor = _anchor(history)
    starts = [i for i in range(1, anchor + 1) if isinstance(history[i], UserMessage)]
    rounds = [
        i
        for i in range(anchor + 1, len(history))
        if isinstance(history[i], CompletionMessage) and not isinstance(history[i - 1], CompletionMessage)
    ]
    # Past the exchange's user message, a start at a round keeps that round and the later ones: the newest
    # round (what the model is about to answer) stays whatever is dropped.
    return starts + (rounds[1:] if anchor >= 0 else [i for i in rounds if i > 0])


def kept(history: list[Message], start: int, anchor: int | None = None) -> list[Message]:
    """The history from ``start`` on, with the newest user message (``anchor``) kept when ``start`` lies past it."""
    anchor = _anchor(history) if anchor is None else anchor
    if 0 <= anchor < start:
        return [history[anchor], *history[start:]]
    return history[start:]


async def fit_history(
    models: ContextModel,
    build: Callable[[list[Message]], ChatRequest],
    history: list[Message],
    policy: ContextPolicy,
    summarize: Summarize | None = None,
    shrink_to: int | None = None,
) -> Fitted:
    """The history the next inference reads, within the model's context by ``policy``.

    Args:
        models: The context size and token counts of the model (the router).
        build: The request a history makes (the plan's).
        history: The history as stored (what shields left of it).
        policy: The strategy.
        summarize: Makes a summary (required for ``compaction``; without it, truncation is used).
        shrink_to: Prompt tokens to fit below instead of the context's budget (after the model server refused
            a prompt this counted as fitting).

    Raises:
        ContextLengthExceededError: the strategy is ``disabled`` and the prompt does not fit, or even the
            newest user message and round do not.
    """
    request = build(history)  # what the model reads when it fits, as it mostly does: built once
    answer = request.sampling.max_tokens or ANSWER_TOKENS
    window = models.context_window(request.model)
    if window is None and shrink_to is not None:  # unknown, but the model server refused more than this
        window = ContextWindow(shrink_to + answer, "the model's refusal")
    if window is None or policy.strategy == "disabled":
        if (recent := since_last_summary(history)) is not history:
            history, request = recent, build(recent)
        if window is not None:
            await check_context(models, request)
        return Fitted(history, request=request)
    budget = window.tokens - answer if shrink_to is None else min(shrink_to, window.tokens - answer)
    offset, summarized = _recent(history, max(budget, 1) * MAX_CHARS_PER_TOKEN)
    # What lies before a summary is not dropped here: it was summarized before.
    older, history = ([] if summarized else history[:offset]), history[offset:]
    if offset:
        request = build(history)
    if budget <= 0:
        await check_context(models, request)
    compacting = policy.strategy == "compaction" and summarize is not None
    threshold = min(budget, policy.compact_threshold or budget) if compacting else budget
    size = await models.prompt_size(request, threshold)
    if size.tokens <= threshold and not size.at_least:
        note = _note("truncation", len(older), 0, size.tokens, window.tokens) if older else None
        return Fitted(history, note, request)
    starts = cut_points(history)
    if compacting and summarize is not None:
        start = await _first_fitting(models, build, history, starts, max(1, threshold // 2))
        if start is None:
            start = await _first_fitting(models, build, history, starts, budget)
        if start is not None and (start > 0 or older):
            return await _compacted(models, build, older, history, start, summarize, budget, window.tokens)
    start = await _first_fitting(models, build, history, starts, budget)
    last = starts[-1] if starts else 0
    if start is None:
        await check_context(models, build(kept(history, last)))
        start = last  # reached only when the count above disagreed: let the model judge
    fitted = kept(history, start)
    request = build(fitted)
    tokens = (await models.prompt_size(request, budget)).tokens
    dropped = len(older) + len(history) - len(fitted)
    return Fitted(fitted, _note("truncation", dropped, 0, tokens, window.tokens), request)


def _note(
    strategy: Literal["truncation", "compaction"], dropped: int, summarized: int, tokens: int, context: int
) -> ContextNote:
    return ContextNote(
        strategy=strategy,
        dropped_messages=dropped,
        summarized_messages=summarized,
        prompt_tokens=tokens,
        context_length=context,
    )


async def minimal_fit(
    models: ContextModel, build: Callable[[list[Message]], ChatRequest], history: list[Message]
) -> None:
    """Refuse a history that no strategy can fit: not even its newest user message and round.

    Raises:
        ContextLengthExceededError: naming the context and the prompt's size (see ``check_context``).
    """
    if models.context_window(build([]).model) is None:
        return
    history = history[_anchor(history) :] if _anchor(history) > 0 else history
    starts = cut_points(history)
    await check_context(models, build(kept(history, starts[-1] if starts else 0)))


async def _first_fitting(
    models: ContextModel,
    build: Callable[[list[Message]], ChatRequest],
    history: list[Message],
    starts: list[int],
    budget: int,
) -> int | None:
    """The earliest start whose kept history fits ``budget`` (a binary search: fewer kept, fewer tokens)."""
    anchor = _anchor(history)
    low, high, found = 0, len(starts) - 1, None
    while low <= high:
        middle = (low + high) // 2
        size = await models.prompt_size(build(kept(history, starts[middle], anchor)), budget)
        if size.tokens <= budget and not size.at_least:
            found, high = starts[middle], middle - 1
        else:
            low = middle + 1
    return found


async def _compacted(
    models: ContextModel,
    build: Callable[[list[Message]], ChatRequest],
    older: list[Message],
    history: list[Message],
    start: int,
    summarize: Summarize,
    budget: int,
    context_length: int,
) -> Fitted:
    """The history with a summary of ``older`` and what lies before ``start`` in its place (truncated further
    if it must)."""
    anchor = _anchor(history)
    rest = kept(history, start, anchor)
    before = [message for i, message in enumerate(history[:start]) if i != anchor or anchor < 0 or anchor >= start]
    replaced = [*since_last_summary(older), *before]  # an earlier summary, and not what it summarized
    fitted = [summary_message(await summarize(replaced)), *rest]
    request = build(fitted)
    size = await models.prompt_size(request, budget)
    if size.tokens > budget or size.at_least:  # the summary itself is too long: truncation goes on from there
        starts = cut_points(fitted)
        later = await _first_fitting(models, build, fitted, starts, budget)
        fitted = kept(fitted, later if later is not None else (starts[-1] if starts else 0))
        request = build(fitted)
        size = await models.prompt_size(request, budget)
    dropped = len(replaced) + len(rest) + 1 - len(fitted)
    return Fitted(fitted, _note("compaction", dropped, len(replaced), size.tokens, context_length), request)
