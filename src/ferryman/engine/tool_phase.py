"""What a turn does with the tool calls an inference made: run the server's, and pause or hand back for the rest.

A server tool runs at once, its arguments and its result judged by the tool
shields (``shield_step.py``). A client tool's call, or one that needs an approval,
pauses the turn until the client answers it (Agents API) or ends the turn with the
calls handed back (Responses API: its results or rulings arrive as a later turn's
input, and :meth:`ToolPhase.run_ruled` runs them then). A turn that reached
``max_infer_iters`` runs none of its last calls: each gets a note that says so.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ferryman.api.agents import ToolExecutionStep, Turn
from ferryman.api.content import CompletionMessage, ToolCall, ToolResponse
from ferryman.ids import new_id, utcnow
from ferryman.tools.context import ToolContext

from .approvals import Ruling, approval_request
from .events import Emit, StepStarted
from .recorder import TurnRecorder
from .screening import TurnScreens
from .shield_step import run_shielded_tools
from .state import TurnState


class ToolPhase:
    """Runs, holds or hands back a turn's tool calls, each batch kept as a ``tool_execution`` step.

    Args:
        recorder: Keeps the turn's steps and its end.
        screens: Runs the tool shields.
    """

    def __init__(self, recorder: TurnRecorder, screens: TurnScreens) -> None:
        self._recorder = recorder
        self._screens = screens

    async def run_server_tools(self, state: TurnState, calls: list[ToolCall], emit: Emit) -> list[ToolResponse]:
        """Run server tool calls through the tool shields; their results, in order."""
        return await run_shielded_tools(calls, state.plan, _context(state), self._screens.checker(state, emit))

    async def run_ruled(self, state: TurnState, ruling: Ruling, emit: Emit) -> None:
        """Run the approved calls of an earlier response and refuse the denied ones, as one tool step.

        The calls enter the history here, with their results: the response that asked
        for approval left them out of it (see :meth:`TurnRecorder.commit_inference`).
        """
        calls = [*ruling.approved, *(call for call, _ in ruling.denied)]
        step_id, started = new_id(), utcnow()
        await emit(StepStarted("tool_execution", step_id, {"approved_call_ids": [c.call_id for c in ruling.approved]}))
        responses = [*await self.run_server_tools(state, ruling.approved, emit), *ruling.denials()]
        step = _ended_now(state, step_id, started, calls, responses)
        call_message = CompletionMessage(content="", stop_reason="end_of_message", tool_calls=calls)
        await self._recorder.save_tool_step(state, step, emit, call_message)

    async def run_tools(
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
        done = {r.call_id: r for r in [*await self.run_server_tools(state, server_calls, emit), *blocked.values()]}
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
            return await self._recorder.pause(state, step, emit)
        await self._recorder.save_tool_step(state, step.model_copy(update={"completed_at": utcnow()}), emit)
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
            await self._recorder.save_tool_step(state, server_only.model_copy(update={"approval_requests": None}), emit)
        return await self._recorder.complete(state, message, emit, approvals=step.approval_requests)

    async def stop_at_cap(self, state: TurnState, message: CompletionMessage, emit: Emit) -> Turn:
        """End a turn that reached max_infer_iters with tool calls still unrun.

        The calls get a recorded "not executed" answer, so that the session's
        history never holds a tool call without its result (models reject that).
        """
        calls = message.tool_calls or []
        step_id, started = new_id(), utcnow()
        await emit(StepStarted("tool_execution", step_id))
        note = f"not executed: the turn reached max_infer_iters ({state.plan.max_infer_iters})"
        responses = [ToolResponse(call_id=c.call_id, tool_name=c.tool_name, content=note) for c in calls]
        step = _ended_now(state, step_id, started, calls, responses)
        await self._recorder.save_tool_step(state, step, emit)
        return await self._recorder.complete(state, message.model_copy(update={"stop_reason": "out_of_tokens"}), emit)


def _ended_now(
    state: TurnState, step_id: str, started: datetime, calls: list[ToolCall], responses: list[ToolResponse]
) -> ToolExecutionStep:
    """A tool step of the turn that ends now, its calls all answered."""
    return ToolExecutionStep(
        turn_id=state.record.turn_id,
        step_id=step_id,
        started_at=started,
        completed_at=utcnow(),
        tool_calls=calls,
        tool_responses=responses,
    )


def _context(state: TurnState) -> ToolContext:
    record = state.record
    return ToolContext(record.session_id, record.turn_id, state.plan.provider_data or {}, record.agent_id)
