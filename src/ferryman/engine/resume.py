"""A paused turn's resume: the caller's answer to its pending tool step, checked before the turn runs again."""

from __future__ import annotations

from dataclasses import dataclass

from ferryman.api.agents import Step, ToolExecutionStep
from ferryman.api.approvals import ApprovalDecision
from ferryman.api.content import ToolCall, ToolResponse
from ferryman.errors import ConflictError

from .approvals import Ruling, rule


@dataclass(frozen=True)
class PendingAnswer:
    """The caller's answer to a paused turn's tool step.

    Attributes:
        step: The pending step with the client's tool responses added (approval requests still unanswered).
        ruling: The decisions on the step's approval requests.
        client_call_ids: The calls the client answered (their results are judged like any tool's).
    """

    step: ToolExecutionStep
    ruling: Ruling
    client_call_ids: frozenset[str] = frozenset()


def complete_pending_step(
    pending: Step | None, responses: list[ToolResponse], decisions: list[ApprovalDecision] | None = None
) -> PendingAnswer:
    """Check the caller's answer to the paused turn's tool step: client results, and approval decisions.

    Raises:
        ConflictError: the client's call ids are not exactly the client calls still waiting.
        InvalidRequestError: the approval decisions do not match the step's approval requests.
    """
    if not isinstance(pending, ToolExecutionStep):
        raise ConflictError("the turn has no pending tool calls")
    requests = pending.approval_requests or []
    ruling = rule(requests, pending.tool_calls, list(decisions or []), "approvals")
    held = {r.call_id for r in requests}
    done = {r.call_id: r for r in pending.tool_responses}
    waiting = [c for c in pending.tool_calls if c.call_id not in done and c.call_id not in held]
    given = {r.call_id: r for r in responses}
    expected = {c.call_id for c in waiting}
    if set(given) != expected or len(given) != len(responses):
        raise ConflictError(
            f"tool_responses must answer exactly the pending call ids {sorted(expected)}; "
            f"got {[r.call_id for r in responses]}"
        )
    merged = {**done, **given}
    answered = [_named(merged[c.call_id], c) for c in pending.tool_calls if c.call_id in merged]
    return PendingAnswer(pending.model_copy(update={"tool_responses": answered}), ruling, frozenset(given))


def _named(response: ToolResponse, call: ToolCall) -> ToolResponse:
    return response if response.tool_name else response.model_copy(update={"tool_name": call.tool_name})
