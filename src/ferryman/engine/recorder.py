"""Keeping a turn's steps and its end: each stored, added to the turn in memory and announced, in that order.

A step is stored before anything else learns of it, so that a client never sees a
step the store lacks; the messages a step adds to the history (an answer, the calls
and their results) are stored in the same write. A turn ends completed (an answer,
or calls handed back to the client), paused (calls wait for the client's results or
an approval), or failed; its record and its last step go in one write.
"""

from __future__ import annotations

from ferryman.api.agents import InferenceStep, Step, ToolExecutionStep, Turn, TurnError
from ferryman.api.approvals import ApprovalRequest
from ferryman.api.content import CompletionMessage, Message, ToolResponseMessage
from ferryman.errors import FailureCode
from ferryman.ids import utcnow
from ferryman.turn_records import StepWrite

from .approvals import unheld
from .events import Emit, StepCompleted, TurnAwaitingInput, TurnCompleted, TurnFailed
from .port import TurnWriter
from .state import TurnState


class TurnRecorder:
    """Stores a turn's steps and its end, keeps them in the turn's state, and announces them.

    Args:
        store: Where turns, steps and history are kept.
    """

    def __init__(self, store: TurnWriter) -> None:
        self.store = store

    async def save(self, state: TurnState, step: Step, emit: Emit, messages: list[Message] | None = None) -> None:
        """Keep a step, and the ``messages`` it adds to the history (none: a shield's check, say)."""
        added = messages or []
        await self.store.save_step(state.record.turn_id, StepWrite(step, messages=added), state.record.infer_iters)
        state.steps.append(step)
        state.history.extend(added)
        await emit(StepCompleted(step))

    async def commit_inference(self, state: TurnState, step: InferenceStep, emit: Emit) -> None:
        """Keep an inference step that the turn goes on from, with its message in the history."""
        # A turn that ends on calls awaiting approval keeps them out of its history: the
        # turn that runs them (or refuses them) adds each call together with its result.
        message = step.model_response
        if state.plan.client_tools_end_turn:
            message = unheld(message, state.plan.approval_required)
        keep = message is step.model_response or message.tool_calls or message.content
        messages: list[Message] = [message] if keep else []
        await self.store.save_step(state.record.turn_id, StepWrite(step, messages=messages), state.record.infer_iters)
        self.place(state, step)
        state.history.extend(messages)
        await emit(StepCompleted(step))

    @staticmethod
    def place(state: TurnState, step: InferenceStep) -> None:
        """Put an inference step among the turn's steps: in the place it holds already, or last."""
        # A step judged by output shields already holds its place, before their steps.
        placed = [i for i, kept in enumerate(state.steps) if kept.step_id == step.step_id]
        if placed:
            state.steps[placed[0]] = step
        else:
            state.steps.append(step)

    async def save_tool_step(
        self, state: TurnState, step: ToolExecutionStep, emit: Emit, call_message: CompletionMessage | None = None
    ) -> None:
        """Keep a tool step, its results (after ``call_message``, the calls' own, when given) in the history."""
        messages: list[Message] = [call_message] if call_message is not None else []
        messages += [ToolResponseMessage(call_id=r.call_id, content=r.content) for r in step.tool_responses]
        await self.save(state, step, emit, messages)

    async def pause(self, state: TurnState, step: ToolExecutionStep, emit: Emit) -> Turn:
        """End the run on a tool step whose calls wait for the client's results or an approval."""
        record = state.record
        await self.store.save_step(record.turn_id, StepWrite(step, pending=True), record.infer_iters)
        record.status = "awaiting_input"
        await self.store.finish_turn(record)
        turn = state.turn().model_copy(update={"approval_requests": step.approval_requests})
        await emit(TurnAwaitingInput(turn))
        return turn

    async def complete(
        self,
        state: TurnState,
        message: CompletionMessage,
        emit: Emit,
        last: InferenceStep | None = None,
        approvals: list[ApprovalRequest] | None = None,
    ) -> Turn:
        """End the turn on ``message``, stored with the inference step ``last`` that said it, when given."""
        record = state.record
        record.status, record.output_message, record.completed_at = "completed", message, utcnow()
        if last is None:
            await self.store.finish_turn(record)
        else:
            await self.store.finish_turn(record, StepWrite(last, messages=[last.model_response]))
            self.place(state, last)
            state.history.append(last.model_response)
            await emit(StepCompleted(last))
        turn = state.turn().model_copy(update={"approval_requests": approvals})
        await emit(TurnCompleted(turn))
        return turn

    async def fail(self, state: TurnState, code: FailureCode, message: str, emit: Emit) -> None:
        """End the turn failed, with the error's code and message."""
        record = state.record
        record.status, record.completed_at = "failed", utcnow()
        record.error = TurnError(code=code, message=message)
        await self.store.finish_turn(record)
        await emit(TurnFailed(record.turn_id, code, message))
