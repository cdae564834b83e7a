"""The turn loop: shields, inference, tools, pauses for client tools, and resumes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from ferryman.api.agents import (
    InferenceStep,
    MemoryRetrievalStep,
    ShieldCallStep,
    TokenUsage,
    ToolExecutionStep,
    Turn,
    TurnError,
)
from ferryman.api.approvals import ApprovalRequest
from ferryman.api.content import (
    CompletionMessage,
    Message,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    content_to_text,
)
from ferryman.errors import ConflictError, ContextLengthExceededError, FailureCode, FerrymanError
from ferryman.ids import new_id, utcnow
from ferryman.safety.base import Shield
from ferryman.storage.base import StepWrite, TurnStore
from ferryman.tools.context import ToolContext

from .approvals import Ruling, approval_request, unheld
from .channel import StopReason
from .context_fit import Fitted, fit_history
from .events import Emit, StepCompleted, StepStarted, TurnAwaitingInput, TurnCompleted, TurnFailed, TurnStarted
from .inference_step import TurnModel, run_inference
from .kept_input import keep_redacted, withhold_input
from .memory import Retriever, recalled_context, user_query, with_context
from .resume import PendingAnswer
from .shield_step import (
    Check,
    Screened,
    ShieldPhase,
    Withheld,
    refusal,
    run_shielded_tools,
    screen,
    screen_calls,
    screen_results,
)
from .state import TurnState
from .summary import summarize
from .tracing import chat_span, record_chat, retrieval_span, running_turn, timed_model
from .turn_log import logged_turn
from .unlisted import UNLISTED_METADATA, unlisted_step

log = logging.getLogger(__name__)

_REFITS = 3
"""How many times an inference the model server refused as too long is fitted shorter and asked again."""
_WHOLE = 1 << 30
"""A budget no prompt reaches: a count against it is exact, not a bound."""
_BARE: dict[str, Any] = {"content": "", "tool_calls": []}
"""What a step stored before shields judged it holds of its message: neither its text nor its calls."""


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
        store: TurnStore,
        model: TurnModel,
        retriever: Retriever | None = None,
        keep_blocked_text: bool = False,
        summary_model: str | None = None,
    ) -> None:
        self._store = store
        self._model = model
        self._retriever = retriever
        self._keep_blocked_text = keep_blocked_text
        self._summary_model = summary_model

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
            await asyncio.shield(self._fail(state, reason.code, reason.message, emit))
            # A cancelled turn is a failed turn like any other: stored, announced, and returned
            # to whoever waits for its outcome (a client's non-streamed call gets its status).
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        except FerrymanError as exc:
            await self._fail(state, exc.code, exc.message, emit)
        except Exception:
            log.exception("turn %s failed", record.turn_id)
            await self._fail(state, FailureCode.INTERNAL_ERROR, "the turn failed on an internal error", emit)
        return state.turn()

    async def _start(self, state: TurnState, emit: Emit) -> Turn:
        await emit(TurnStarted(state.record.turn_id))
        await self._record_unlisted(state, emit)
        # Nothing runs before the input passed its shields: no retrieval, no tool, no inference.
        if state.plan.input_shields:
            given = state.turn_input()
            screened = await self._screen(state, state.plan.input_shields, given, "input", emit)
            if screened.blocking is not None:
                answer = refusal(screened.blocking)
                await withhold_input(self._store, state, given, answer)
                return await self._complete(state, answer, emit)
            if screened.messages != given:
                await keep_redacted(self._store, state, given, screened.messages)
        if state.documents:
            await self._retrieve(state, emit)
        if state.ruled is not None:
            await self._run_ruled(state, state.ruled, emit)
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
        judged = await screen_results(client, state.plan.tool_output_shields, self._checker(state, emit))
        # Approved calls run now, with the arguments stored when the turn paused.
        ran = await self._run_server_tools(state, ruling.approved, emit)
        done = {r.call_id: r for r in [*step.tool_responses, *judged, *ran, *ruling.denials()]}
        ordered = [done[c.call_id] for c in step.tool_calls]
        completed = step.model_copy(
            update={"tool_responses": ordered, "approval_requests": None, "completed_at": utcnow()}
        )
        await self._save_tool_step(state, completed, emit)
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
        step = unlisted_step(state.record.turn_id, step_id, started, unlisted)
        await self._store.save_step(state.record.turn_id, StepWrite(step), state.record.infer_iters)
        state.steps.append(step)
        await emit(StepCompleted(step))

    async def _run_ruled(self, state: TurnState, ruling: Ruling, emit: Emit) -> None:
        """Run the approved calls of an earlier response and refuse the denied ones, as one tool step.

        The calls enter the history here, with their results: the response that asked
        for approval left them out of it (see :meth:`_commit_inference`).
        """
        calls = [*ruling.approved, *(call for call, _ in ruling.denied)]
        step_id, started = new_id(), utcnow()
        await emit(StepStarted("tool_execution", step_id, {"approved_call_ids": [c.call_id for c in ruling.approved]}))
        responses = [*await self._run_server_tools(state, ruling.approved, emit), *ruling.denials()]
        step = ToolExecutionStep(
            turn_id=state.record.turn_id,
            step_id=step_id,
            started_at=started,
            completed_at=utcnow(),
            tool_calls=calls,
            tool_responses=responses,
        )
        call_message = CompletionMessage(content="", stop_reason="end_of_message", tool_calls=calls)
        await self._save_tool_step(state, step, emit, call_message)

    async def _loop(self, state: TurnState, emit: Emit) -> Turn:
        plan = state.plan
        while True:
            withheld = Withheld(emit, hold=bool(plan.output_shields), hold_calls=bool(plan.tool_input_shields))
            step = await self._infer(state, withheld)
            message = step.model_response
            if not message.tool_calls:
                if plan.output_shields:
                    return await self._screen_answer(state, step, withheld, emit)
                # The common last step: stored together with the turn's end, in one write.
                return await self._complete(state, message, emit, last=step)
            if plan.output_shields and content_to_text(message.content).strip():
                # Text said beside tool calls reaches the client too: it is judged like an answer.
                judged = await self._screen_said(state, step, withheld, emit)
                if isinstance(judged, Turn):
                    return judged
                step, message = judged, judged.model_response
            blocked: dict[str, ToolResponse] = {}
            if plan.tool_input_shields:
                step, blocked = await self._screen_calls(state, step, withheld, emit)
                message = step.model_response
            await withheld.release()
            await self._commit_inference(state, step, emit)
            if state.record.infer_iters >= plan.max_infer_iters:
                return await self._stop_at_cap(state, message, emit)
            paused = await self._run_tools(state, message, blocked, emit)
            if paused is not None:
                return paused

    async def _infer(self, state: TurnState, withheld: Withheld) -> InferenceStep:
        """Run one inference, streaming its progress (held back while output shields judge); not stored yet.

        The history is fitted to the model's context by the plan's strategy (``_fit``); a prompt no strategy
        can fit, or any that does not fit with ``disabled``, fails the turn before the model is asked.
        """
        fitted = await self._fit(state)
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
                fitted = await self._fit(state, shrink_to=max(1, sent.tokens * 3 // 4))
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

    async def _fit(self, state: TurnState, shrink_to: int | None = None) -> Fitted:
        """The history the next inference reads, within the model's context (``context_fit.py``).

        A summary replaces what it summarized for the rest of the run; made before the turn's first inference,
        it is also stored in place of the turn's messages so far (the summary, then what the model reads of the
        history), so that later turns start from it (``since_last_summary``).
        """
        plan = state.plan

        async def summarize_messages(messages: list[Message]) -> str:
            model = self._summary_model or plan.model
            return (await summarize(self._model, model, messages, plan.provider_data)).text

        fitted = await fit_history(
            self._model, plan.chat_request, state.history, plan.context, summarize_messages, shrink_to
        )
        if fitted.note is not None and fitted.note.strategy == "compaction":
            first = state.record.infer_iters == 0 and state.ruled is None and not state.documents
            if first and fitted.history[-len(state.turn_input()) :] == state.turn_input():
                await self._store.redact_turn_input(
                    state.record.turn_id, state.record.input_messages, list(fitted.history)
                )
            state.history = list(fitted.history)
        return fitted

    async def _commit_inference(self, state: TurnState, step: InferenceStep, emit: Emit) -> None:
        # A turn that ends on calls awaiting approval keeps them out of its history: the
        # turn that runs them (or refuses them) adds each call together with its result.
        message = step.model_response
        if state.plan.client_tools_end_turn:
            message = unheld(message, state.plan.approval_required)
        keep = message is step.model_response or message.tool_calls or message.content
        messages: list[Message] = [message] if keep else []
        await self._store.save_step(state.record.turn_id, StepWrite(step, messages=messages), state.record.infer_iters)
        self._place(state, step)
        state.history.extend(messages)
        await emit(StepCompleted(step))

    @staticmethod
    def _place(state: TurnState, step: InferenceStep) -> None:
        # A step judged by output shields already holds its place, before their steps.
        placed = [i for i, kept in enumerate(state.steps) if kept.step_id == step.step_id]
        if placed:
            state.steps[placed[0]] = step
        else:
            state.steps.append(step)

    async def _screen_calls(
        self, state: TurnState, step: InferenceStep, withheld: Withheld, emit: Emit
    ) -> tuple[InferenceStep, dict[str, ToolResponse]]:
        """Judge the step's server tool calls' arguments with the tool input shields, before anything keeps them.

        The step is stored first without its calls, so that it keeps its place before its shield
        steps. A blocked call's arguments are withheld, a redacted call's take the redacted form:
        in the step, the message the history keeps and the held stream events alike.

        Returns:
            The step as the turn goes on with it, and the notes of the blocked calls by call id.
        """
        message = step.model_response
        judged = [call for call in message.tool_calls or [] if call.tool_name not in state.plan.client_tools]
        if not judged:
            return step, {}
        state.record.output_message = None  # a turn that fails meanwhile must not store the unjudged calls
        placeholder = step.model_copy(update={"model_response": message.model_copy(update=_BARE)})
        await self._store.save_step(state.record.turn_id, StepWrite(placeholder), state.record.infer_iters)
        self._place(state, placeholder)
        screened, blocked = await screen_calls(judged, state.plan.tool_input_shields, self._checker(state, emit))
        calls = [screened.get(call.call_id, call) for call in message.tool_calls or []]
        for before, after in zip(message.tool_calls or [], calls, strict=True):
            if after != before:
                withheld.replace_call(after)
        said = message.model_copy(update={"tool_calls": calls})
        state.record.output_message = said
        return step.model_copy(update={"model_response": said}), blocked

    def _record_inference(self, state: TurnState, step: InferenceStep) -> None:
        self._place(state, step)
        state.history.append(step.model_response)

    @staticmethod
    def _context(state: TurnState) -> ToolContext:
        record = state.record
        return ToolContext(record.session_id, record.turn_id, state.plan.provider_data or {}, record.agent_id)

    def _checker(self, state: TurnState, emit: Emit) -> Check:
        async def check(shields: list[Shield], messages: list[Message], phase: ShieldPhase) -> Screened:
            return await self._screen(state, shields, messages, phase, emit)

        return check

    async def _run_server_tools(self, state: TurnState, calls: list[ToolCall], emit: Emit) -> list[ToolResponse]:
        return await run_shielded_tools(calls, state.plan, self._context(state), self._checker(state, emit))

    async def _run_tools(
        self, state: TurnState, message: CompletionMessage, blocked: dict[str, ToolResponse], emit: Emit
    ) -> Turn | None:
        """Run the message's server calls, then hand back or pause for the others; ``blocked`` calls get their notes."""
        calls = message.tool_calls or []
        step_id, started = new_id(), utcnow()
        plan = state.plan
        client_calls = [c.call_id for c in calls if c.tool_name in plan.client_tools]
        held = [
            approval_request(c) for c in calls if c.tool_name in plan.approval_required and c.call_id not in blocked
        ]
        metadata: dict[str, Any] = {"client_tool_call_ids": client_calls} if client_calls else {}
        if held:
            metadata["approval_call_ids"] = [r.call_id for r in held]
        await emit(StepStarted("tool_execution", step_id, metadata))
        waiting = {*client_calls, *(r.call_id for r in held)}
        server_calls = [c for c in calls if c.call_id not in waiting and c.call_id not in blocked]
        done = {r.call_id: r for r in [*await self._run_server_tools(state, server_calls, emit), *blocked.values()]}
        responses = [done[c.call_id] for c in calls if c.call_id in done]
        step = ToolExecutionStep(
            turn_id=state.record.turn_id,
            step_id=step_id,
            started_at=started,
            tool_calls=calls,
            tool_responses=responses,
            approval_requests=held or None,
        )
        if waiting and plan.client_tools_end_turn:
            return await self._hand_back(state, step, message, emit)
        if waiting:
            return await self._pause(state, step, emit)
        await self._save_tool_step(state, step.model_copy(update={"completed_at": utcnow()}), emit)
        return None

    async def _hand_back(
        self, state: TurnState, step: ToolExecutionStep, message: CompletionMessage, emit: Emit
    ) -> Turn:
        """End the turn on client tool calls; their results arrive as the input of a later turn."""
        server_ids = {r.call_id for r in step.tool_responses}
        if server_ids:
            server_only = step.model_copy(
                update={"tool_calls": [c for c in step.tool_calls if c.call_id in server_ids], "completed_at": utcnow()}
            )
            await self._save_tool_step(state, server_only.model_copy(update={"approval_requests": None}), emit)
        return await self._complete(state, message, emit, approvals=step.approval_requests)

    async def _stop_at_cap(self, state: TurnState, message: CompletionMessage, emit: Emit) -> Turn:
        """End a turn that reached max_infer_iters with tool calls still unrun.

        The calls get a recorded "not executed" answer, so that the session's
        history never holds a tool call without its result (models reject that).
        """
        calls = message.tool_calls or []
        step_id, started = new_id(), utcnow()
        await emit(StepStarted("tool_execution", step_id))
        note = f"not executed: the turn reached max_infer_iters ({state.plan.max_infer_iters})"
        responses = [ToolResponse(call_id=c.call_id, tool_name=c.tool_name, content=note) for c in calls]
        step = ToolExecutionStep(
            turn_id=state.record.turn_id,
            step_id=step_id,
            started_at=started,
            completed_at=utcnow(),
            tool_calls=calls,
            tool_responses=responses,
        )
        await self._save_tool_step(state, step, emit)
        return await self._complete(state, message.model_copy(update={"stop_reason": "out_of_tokens"}), emit)

    async def _save_tool_step(
        self, state: TurnState, step: ToolExecutionStep, emit: Emit, call_message: CompletionMessage | None = None
    ) -> None:
        messages: list[Message] = [call_message] if call_message is not None else []
        messages += [ToolResponseMessage(call_id=r.call_id, content=r.content) for r in step.tool_responses]
        await self._store.save_step(state.record.turn_id, StepWrite(step, messages=messages), state.record.infer_iters)
        state.steps.append(step)
        state.history.extend(messages)
        await emit(StepCompleted(step))

    async def _pause(self, state: TurnState, step: ToolExecutionStep, emit: Emit) -> Turn:
        record = state.record
        await self._store.save_step(record.turn_id, StepWrite(step, pending=True), record.infer_iters)
        record.status = "awaiting_input"
        await self._store.finish_turn(record)
        turn = state.turn().model_copy(update={"approval_requests": step.approval_requests})
        await emit(TurnAwaitingInput(turn))
        return turn

    async def _screen(
        self, state: TurnState, shields: list[Shield], messages: list[Message], phase: ShieldPhase, emit: Emit
    ) -> Screened:
        async def save(step: ShieldCallStep) -> None:
            await self._store.save_step(state.record.turn_id, StepWrite(step), state.record.infer_iters)
            state.steps.append(step)
            await emit(StepCompleted(step))

        return await screen(shields, messages, phase, state.record.turn_id, save, emit, self._keep_blocked_text)

    async def _screen_answer(self, state: TurnState, step: InferenceStep, withheld: Withheld, emit: Emit) -> Turn:
        """Run the output shields over the final answer, whose text the client has not seen yet.

        The inference step is stored first without its text (so that it keeps its place before its
        shield steps), then once more with the answer as it ends the turn: the model's, a shield's
        redacted form, or the refusal of a blocking violation (the blocked text is never stored).
        """
        judged = await self._screen_said(state, step, withheld, emit)
        if isinstance(judged, Turn):
            return judged
        await withheld.release()
        return await self._complete(state, judged.model_response, emit, last=judged)

    async def _screen_said(
        self, state: TurnState, step: InferenceStep, withheld: Withheld, emit: Emit
    ) -> InferenceStep | Turn:
        """Judge a step's text with the output shields: the turn ended on the refusal, or the step as it goes on.

        On a pass the step keeps its text (or a shield's redacted form, which then replaces the
        held text deltas); its other held events are released by the caller.
        """
        message = step.model_response
        state.record.output_message = None  # a turn that fails meanwhile must not store the unjudged answer
        placeholder = step.model_copy(update={"model_response": message.model_copy(update=_BARE)})
        await self._store.save_step(state.record.turn_id, StepWrite(placeholder), state.record.infer_iters)
        state.steps.append(placeholder)
        screened = await self._screen(state, state.plan.output_shields, [*state.turn_input(), message], "output", emit)
        if screened.blocking is not None:
            answer = refusal(screened.blocking)
            return await self._complete(state, answer, emit, last=step.model_copy(update={"model_response": answer}))
        said = message.model_copy(update={"content": screened.messages[-1].content})
        if said.content != message.content:
            withheld.replace_text(step.step_id, content_to_text(said.content))
        state.record.output_message = said
        return step.model_copy(update={"model_response": said})

    async def _complete(
        self,
        state: TurnState,
        message: CompletionMessage,
        emit: Emit,
        last: InferenceStep | None = None,
        approvals: list[ApprovalRequest] | None = None,
    ) -> Turn:
        record = state.record
        record.status, record.output_message, record.completed_at = "completed", message, utcnow()
        if last is None:
            await self._store.finish_turn(record)
        else:
            await self._store.finish_turn(record, StepWrite(last, messages=[last.model_response]))
            self._record_inference(state, last)
            await emit(StepCompleted(last))
        turn = state.turn().model_copy(update={"approval_requests": approvals})
        await emit(TurnCompleted(turn))
        return turn

    async def _fail(self, state: TurnState, code: FailureCode, message: str, emit: Emit) -> None:
        record = state.record
        record.status, record.completed_at = "failed", utcnow()
        record.error = TurnError(code=code, message=message)
        await self._store.finish_turn(record)
        await emit(TurnFailed(record.turn_id, code, message))
