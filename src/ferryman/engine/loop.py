"""The turn loop: shields, inference, tools, pauses for client tools, and resumes.

The loop's parts live beside it: one inference over the fitted history
(``fitted_inference.py``), the shields as the loop runs them (``screening.py``),
what becomes of the calls an inference made (``tool_phase.py``), and how each
step and the turn's end are kept (``recorder.py``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from ferryman.api.agents import MemoryRetrievalStep, Turn
from ferryman.api.content import ToolResponse, content_to_text
from ferryman.errors import ConflictError, FailureCode, FerrymanError
from ferryman.ids import new_id, utcnow
from ferryman.turn_records import StepWrite

from .channel import StopReason
from .events import Emit, StepCompleted, StepStarted, TurnStarted
from .fitted_inference import FittedInference
from .inference_step import TurnModel
from .kept_input import keep_redacted, withhold_input
from .memory import Retriever, recalled_context, user_query, with_context
from .port import TurnWriter
from .recorder import TurnRecorder
from .resume import PendingAnswer
from .screening import TurnScreens
from .shield_step import Withheld, refusal, screen_results
from .state import TurnState
from .tool_phase import ToolPhase
from .tracing import retrieval_span, running_turn
from .turn_log import logged_turn
from .unlisted import UNLISTED_METADATA, unlisted_step

log = logging.getLogger(__name__)


class TurnEngine:
    """Drives turns over a store and a model; knows no HTTP and no SQL.

    Args:
        store: Where turns, steps and history are kept.
        model: Where inference goes (a router over providers).
        retriever: Indexes and searches a turn's large documents (None: turns carry none).
        keep_blocked_text: Keep what a shield blocked in its ``shield_call`` step's violation
            metadata, for an operator's review (it is never replayed either way).
        summary_model: The model that writes compaction's summaries (None: each turn's own model).
    """

    def __init__(
        self,
        store: TurnWriter,
        model: TurnModel,
        retriever: Retriever | None = None,
        keep_blocked_text: bool = False,
        summary_model: str | None = None,
    ) -> None:
        self._store = store
        self._retriever = retriever
        self._inference = FittedInference(store, model, summary_model)
        self._recorder = TurnRecorder(store)
        self._screens = TurnScreens(self._recorder, keep_blocked_text)
        self._tools = ToolPhase(self._recorder, self._screens)

    async def run(self, state: TurnState, emit: Emit) -> Turn:
        """Run a new turn from its input messages to an answer or a pause."""
        with logged_turn(state.record, "started"):
            return await self._guarded(state, emit, self._start(state, emit))

    async def resume(self, state: TurnState, answer: PendingAnswer, emit: Emit) -> Turn:
        """Continue a paused turn with the caller's answer to its pending step (see :func:`complete_pending_step`)."""
        with logged_turn(state.record, "resumed"):
            return await self._guarded(state, emit, self._resume(state, answer, emit))

    async def _guarded(self, state: TurnState, emit: Emit, body: Coroutine[Any, Any, Turn]) -> Turn:
        with running_turn(state.span, state.record):
            return await self._outcome(state, emit, body)

    async def _outcome(self, state: TurnState, emit: Emit, body: Coroutine[Any, Any, Turn]) -> Turn:
        record = state.record
        try:
            return await body
        except asyncio.CancelledError as exc:
            reason = exc.args[0] if exc.args else None
            if not isinstance(reason, StopReason):
                reason = StopReason(FailureCode.CANCELLED, str(reason or "the turn was cancelled"))
            await asyncio.shield(self._recorder.fail(state, reason.code, reason.message, emit))
            # A cancelled turn is a failed turn like any other: stored, announced, and returned
            # to whoever waits for its outcome (a client's non-streamed call gets its status).
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        except FerrymanError as exc:
            await self._recorder.fail(state, exc.code, exc.message, emit)
        except Exception:
            log.exception("turn %s failed", record.turn_id)
            await self._recorder.fail(state, FailureCode.INTERNAL_ERROR, "the turn failed on an internal error", emit)
        return state.turn()

    async def _start(self, state: TurnState, emit: Emit) -> Turn:
        await emit(TurnStarted(state.record.turn_id))
        await self._record_unlisted(state, emit)
        # Nothing runs before the input passed its shields: no retrieval, no tool, no inference.
        if state.plan.input_shields:
            given = state.turn_input()
            screened = await self._screens.screen(state, state.plan.input_shields, given, "input", emit)
            if screened.blocking is not None:
                answer = refusal(screened.blocking)
                await withhold_input(self._store, state, given, answer)
                return await self._recorder.complete(state, answer, emit)
            if screened.messages != given:
                await keep_redacted(self._store, state, given, screened.messages)
        if state.documents:
            await self._retrieve(state, emit)
        if state.ruled is not None:
            await self._tools.run_ruled(state, state.ruled, emit)
        return await self._loop(state, emit)

    async def _retrieve(self, state: TurnState, emit: Emit) -> None:
        """The memory_retrieval step: index the turn's documents, put the best chunks in the user message."""
        if self._retriever is None:
            raise ConflictError("this server cannot index a turn's documents")
        step_id, started = new_id(), utcnow()
        await emit(StepStarted("memory_retrieval", step_id))
        query = user_query(state.history)
        with retrieval_span(query) as span:
            found = await self._retriever.recall(state.record.session_id, state.documents, query)
            span.set_attribute("gen_ai.data_source.id", found.vector_db_id)
        step = MemoryRetrievalStep(
            turn_id=state.record.turn_id,
            step_id=step_id,
            started_at=started,
            completed_at=utcnow(),
            vector_db_ids=found.vector_db_id,
            inserted_context=found.context,
        )
        await self._store.save_step(state.record.turn_id, StepWrite(step), state.record.infer_iters)
        state.steps.append(step)
        state.history = with_context(state.history, found.context)
        await emit(StepCompleted(step))

    async def _resume(self, state: TurnState, answer: PendingAnswer, emit: Emit) -> Turn:
        await emit(TurnStarted(state.record.turn_id))
        state.history = recalled_context(state.history, state.steps)
        step, ruling = answer.step, answer.ruling
        # The client's results pass the tool output shields, as a server tool's do, before the model reads them.
        client = [r for r in step.tool_responses if r.call_id in answer.client_call_ids]
        judged = await screen_results(client, state.plan.tool_output_shields, self._screens.checker(state, emit))
        # Approved calls run now, with the arguments stored when the turn paused.
        ran = await self._tools.run_server_tools(state, ruling.approved, emit)
        done = {r.call_id: r for r in [*step.tool_responses, *judged, *ran, *ruling.denials()]}
        ordered = [done[c.call_id] for c in step.tool_calls]
        completed = step.model_copy(
            update={"tool_responses": ordered, "approval_requests": None, "completed_at": utcnow()}
        )
        await self._recorder.save_tool_step(state, completed, emit)
        await self._record_unlisted(state, emit)
        return await self._loop(state, emit)

    async def _record_unlisted(self, state: TurnState, emit: Emit) -> None:
        """Record the toolgroups this run could not list as a step (see ``unlisted.py``); the model reads the
        same in its system message. The step adds nothing to the history: each run lists its tools anew."""
        unlisted = state.plan.unlisted
        if not unlisted:
            return
        step_id, started = new_id(), utcnow()
        await emit(StepStarted("tool_execution", step_id, {UNLISTED_METADATA: [item.source for item in unlisted]}))
        await self._recorder.save(state, unlisted_step(state.record.turn_id, step_id, started, unlisted), emit)

    async def _loop(self, state: TurnState, emit: Emit) -> Turn:
        plan = state.plan
        while True:
            withheld = Withheld(emit, hold=bool(plan.output_shields), hold_calls=bool(plan.tool_input_shields))
            step = await self._inference.infer(state, withheld)
            message = step.model_response
            if not message.tool_calls:
                if plan.output_shields:
                    return await self._screens.answer(state, step, withheld, emit)
                # The common last step: stored together with the turn's end, in one write.
                return await self._recorder.complete(state, message, emit, last=step)
            if plan.output_shields and content_to_text(message.content).strip():
                # Text said beside tool calls reaches the client too: it is judged like an answer.
                judged = await self._screens.said(state, step, withheld, emit)
                if isinstance(judged, Turn):
                    return judged
                step, message = judged, judged.model_response
            blocked: dict[str, ToolResponse] = {}
            if plan.tool_input_shields:
                step, blocked = await self._screens.calls(state, step, withheld, emit)
                message = step.model_response
            await withheld.release()
            await self._recorder.commit_inference(state, step, emit)
            if state.record.infer_iters >= plan.max_infer_iters:
                return await self._tools.stop_at_cap(state, message, emit)
            paused = await self._tools.run_tools(state, message, blocked, emit)
            if paused is not None:
                return paused
