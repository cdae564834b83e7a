"""Which server tool calls wait for approval, and how a decision is bound to a call's exact arguments."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from ferryman.api.approvals import ApprovalDecision, ApprovalFilter, ApprovalRequest, RequireApproval
from ferryman.api.content import CompletionMessage, ToolCall, ToolResponse
from ferryman.errors import InvalidRequestError


@dataclass(frozen=True)
class ApprovalPolicy:
    """One ``require_approval`` setting, asked per tool name.

    Args:
        always: Tools that need approval.
        never: Tools that do not.
        default: Whether a tool named in neither needs approval.
    """

    always: frozenset[str] = frozenset()
    never: frozenset[str] = frozenset()
    default: bool = False

    @classmethod
    def of(cls, spec: RequireApproval | None) -> ApprovalPolicy:
        """The policy a ``require_approval`` value states (None: no approval, ferryman's default)."""
        if spec is None or spec == "never":
            return cls()
        if spec == "always":
            return cls(default=True)
        assert isinstance(spec, ApprovalFilter)
        always = frozenset(spec.always.tool_names) if spec.always else frozenset()
        never = frozenset(spec.never.tool_names) if spec.never else frozenset()
        return cls(always, never, default=spec.always is None and spec.never is not None)

    def requires(self, tool_name: str) -> bool:
        """Whether a call of this tool waits for approval."""
        if tool_name in self.always:
            return True
        if tool_name in self.never:
            return False
        return self.default


def approval_digest(tool_name: str, arguments: dict[str, Any] | str) -> str:
    """The sha256 (hex) of the canonical JSON of a call's tool name and arguments."""
    canonical = json.dumps(
        {"tool_name": tool_name, "arguments": arguments}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def approval_request(call: ToolCall) -> ApprovalRequest:
    """The request a call that needs approval shows the caller."""
    return ApprovalRequest(
        call_id=call.call_id,
        tool_name=call.tool_name,
        arguments=call.arguments,
        digest=approval_digest(call.tool_name, call.arguments),
    )


def unheld(message: CompletionMessage, held: frozenset[str]) -> CompletionMessage:
    """The message without its calls of tools held for approval (the same message when it has none)."""
    calls = message.tool_calls or []
    kept = [call for call in calls if call.tool_name not in held]
    if len(kept) == len(calls):
        return message
    return message.model_copy(
        update={"tool_calls": kept, "stop_reason": "end_of_turn" if not kept else message.stop_reason}
    )


def denial(call: ToolCall, reason: str | None) -> ToolResponse:
    """What the model learns of a call the caller refused."""
    note = "the user denied this call" + (f": {reason}" if reason else "")
    return ToolResponse(call_id=call.call_id, tool_name=call.tool_name, content=note, metadata={"denied": True})


@dataclass(frozen=True)
class Ruling:
    """The caller's decisions on a paused step's approval requests, checked against its stored calls.

    Attributes:
        approved: The calls to run, with their stored arguments.
        denied: The refused calls with the caller's reasons.
    """

    approved: list[ToolCall]
    denied: list[tuple[ToolCall, str | None]]

    def denials(self) -> list[ToolResponse]:
        """The responses the model gets for the refused calls."""
        return [denial(call, reason) for call, reason in self.denied]


def rule(
    requests: list[ApprovalRequest], calls: list[ToolCall], decisions: list[ApprovalDecision], field: str
) -> Ruling:
    """Match the caller's decisions to the pending requests.

    Args:
        requests: The approval requests stored with the paused step.
        calls: The step's stored tool calls.
        decisions: The caller's answers.
        field: The request field named in errors.

    Raises:
        InvalidRequestError: a request without a decision, a decision for no pending request (or two for one),
            or a call whose stored arguments no longer match the digest it was shown with.
    """
    by_id = {call.call_id: call for call in calls}
    wanted = {request.call_id: request for request in requests}
    given = {decision.call_id: decision for decision in decisions}
    unknown = sorted(set(given) - set(wanted))
    if unknown or len(given) != len(decisions):
        raise InvalidRequestError(f"approvals name unknown or repeated call ids {unknown or sorted(given)}", field)
    missing = sorted(set(wanted) - set(given))
    if missing:
        raise InvalidRequestError(f"approvals lack a decision for the pending call ids {missing}", field)
    ruling = Ruling([], [])
    for call_id, request in wanted.items():
        call, decision = by_id.get(call_id), given[call_id]
        if call is None or approval_digest(call.tool_name, call.arguments) != request.digest:
            raise InvalidRequestError(f"the arguments of call '{call_id}' changed since approval was requested", field)
        if decision.digest is not None and decision.digest != request.digest:
            raise InvalidRequestError(f"the digest given for call '{call_id}' is not the pending call's", field)
        if decision.approve:
            ruling.approved.append(call)
        else:
            ruling.denied.append((call, decision.reason))
    return ruling
