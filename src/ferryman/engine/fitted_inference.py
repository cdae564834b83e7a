"""One inference of a turn, its history fitted to the model's context first, and asked again shorter when refused.

The history is fitted by the plan's strategy (``context_fit.py``). The model server
may still count more tokens than we did: a prompt it refuses as too long is fitted
below what it was sent and asked again, a few times at most, unless the strategy is
``disabled`` or nothing more can be left out.
"""

from __future__ import annotations

from ferryman.api.agents import InferenceStep, MemoryRetrievalStep, TokenUsage
from ferryman.api.content import Message, UserMessage
from ferryman.errors import ContextLengthExceededError
from ferryman.ids import new_id, utcnow

from .context_fit import Fitted, fit_history, opens_with_summary
from .events import Emit, HistoryCompacted, StepStarted
from .inference_step import TurnModel, run_inference
from .port import TurnWriter
from .shield_step import Withheld
from .state import TurnState
from .summary import summarize
from .tracing import chat_span, record_chat, timed_model

_REFITS = 3
"""How many times an inference the model server refused as too long is fitted shorter and asked again."""
_WHOLE = 1 << 30
"""A budget no prompt reaches: a count against it is exact, not a bound."""


class FittedInference:
    """Runs a turn's inferences, each over the history fitted to the model's context.

    Args:
        store: Where a summary replaces the turn's messages so far.
        model: Where inference goes (a router over providers).
        summary_model: The model that writes compaction's summaries (None: each turn's own model).
    """

    def __init__(self, store: TurnWriter, model: TurnModel, summary_model: str | None = None) -> None:
        self._store = store
        self._model = model
        self._summary_model = summary_model

    async def infer(self, state: TurnState, withheld: Withheld) -> InferenceStep:
        """Run one inference, streaming its progress (held back while output shields judge); not stored yet.

        The history is fitted to the model's context by the plan's strategy (``_fit``); a prompt no strategy
        can fit, or any that does not fit with ``disabled``, fails the turn before the model is asked.
        """
        fitted = await self._fit(state, withheld.emit_now)
        request = fitted.request or state.plan.chat_request(fitted.history)
        step_id, started = new_id(), utcnow()
        await withheld.emit_now(StepStarted("inference", step_id))
        for _ in range(_REFITS):
            try:
                with chat_span(request, self._model) as span:
                    result = await run_inference(timed_model(self._model, span), request, step_id, withheld)
                    record_chat(span, request, result.message, result.usage)
                break
            except ContextLengthExceededError:
                # The model server counted more tokens than we did: fit below what it was sent, and ask again.
                if state.plan.context.strategy == "disabled":
                    raise
                sent = await self._model.prompt_size(request, _WHOLE)
                refused = len(fitted.history)
                fitted = await self._fit(state, withheld.emit_now, max(1, sent.tokens * 3 // 4))
                if len(fitted.history) >= refused:  # nothing more can be left out
                    raise
                request = fitted.request or state.plan.chat_request(fitted.history)
        else:
            raise ContextLengthExceededError(
                f"model '{request.model}' refused the prompt as too long {_REFITS} times, each one shorter"
            )
        step = InferenceStep(
            turn_id=state.record.turn_id,
            step_id=step_id,
            started_at=started,
            completed_at=utcnow(),
            model_response=result.message,
            usage=TokenUsage(input_tokens=result.usage.input_tokens, output_tokens=result.usage.output_tokens)
            if result.usage
            else None,
            context_management=fitted.note,
        )
        state.record.infer_iters += 1
        state.record.output_message = result.message
        return step

    async def _fit(self, state: TurnState, emit: Emit, shrink_to: int | None = None) -> Fitted:
        """The history the next inference reads, within the model's context (``context_fit.py``).

        A summary replaces what it summarized for the rest of the run, and in the store too: the turn's messages
        so far give way to the history fitted (the summary, then what the model reads after it), so that later
        turns, and a ``previous_response_id`` chain read from the store, start from it (``since_last_summary``),
        whichever inference of the turn it came before. It is announced (:class:`HistoryCompacted`), so that a
        façade can hand the compacted history to its client. A summary too long to fit, dropped again by
        truncation, replaces nothing: the history fitted then is only this inference's (stored, it would lose the
        turn's earlier rounds, and hold copies of earlier turns' messages read again after their own).
        """
        plan = state.plan

        async def summarize_messages(messages: list[Message]) -> str:
            model = self._summary_model or plan.model
            return (await summarize(self._model, model, messages, plan.provider_data)).text

        fitted = await fit_history(
            self._model, plan.chat_request, state.history, plan.context, summarize_messages, shrink_to
        )
        if fitted.note is not None and fitted.note.strategy == "compaction" and opens_with_summary(fitted.history):
            await self._store.redact_turn_input(
                state.record.turn_id, state.record.input_messages, _as_stored(state, fitted.history)
            )
            state.history = list(fitted.history)
            await emit(HistoryCompacted(list(fitted.history)))
        return fitted


def _as_stored(state: TurnState, history: list[Message]) -> list[Message]:
    """The fitted history as the store keeps it: the turn's user message without what its memory_retrieval step
    put in it (a resumed run recalls that from the step, ``memory.recalled_context``)."""
    if not any(isinstance(step, MemoryRetrievalStep) for step in state.steps):
        return list(history)
    sent = next((m for m in reversed(state.record.input_messages) if isinstance(m, UserMessage)), None)
    at = next((i for i in range(len(history) - 1, -1, -1) if isinstance(history[i], UserMessage)), None)
    if sent is None or at is None:
        return list(history)
    return [*history[:at], sent, *history[at + 1 :]]
