"""Approval of server tool calls: policies, the requests a paused turn shows, and the caller's decisions.

These are ferryman extensions of the Agents API (Llama Stack has no approvals)
shaped after the OpenAI Responses ``mcp`` tool's ``require_approval``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from .limits import MAX_TOOLS, AtMost, Id, MessageText, Name


class ToolNames(BaseModel):
    """The tools a part of an approval filter names."""

    tool_names: Annotated[list[Name], AtMost(MAX_TOOLS)] = Field(default_factory=list)


class ApprovalFilter(BaseModel):
    """Which tools need approval (``always``) and which do not (``never``).

    A tool named in neither follows the filter's default: when ``always`` is
    given, unnamed tools run without approval; when only ``never`` is given,
    every other tool needs approval.
    """

    always: ToolNames | None = None
    never: ToolNames | None = None


RequireApproval = Literal["always", "never"] | ApprovalFilter
"""When server tool calls wait for the caller's approval before they run."""


class ApprovalRequest(BaseModel):
    """A server tool call that waits for the caller's approval.

    ``digest`` (sha256 of the canonical JSON of the tool name and arguments)
    binds a decision to exactly these arguments.
    """

    call_id: str
    tool_name: str
    arguments: dict[str, Any] | str
    digest: str


class ApprovalDecision(BaseModel):
    """The caller's answer to one approval request."""

    call_id: Id
    approve: bool
    reason: MessageText | None = None
    digest: Id | None = None
    """The request's digest, if the caller wants the arguments it approved checked too."""


ApprovalStatus = Literal["pending", "approved", "denied"]
ApprovalSource = Literal["turn", "response"]


class Approval(BaseModel):
    """A server tool call waiting for a person's approval, or decided through ``/v1/approvals`` (ferryman's own).

    A turn's call (the Agents API) names its agent, session and turn; a response's
    (the Responses API's ``mcp_approval_request``) names its response.
    """

    id: str
    """The approval request's id: a response's ``mcp_approval_request`` item id, or one the server gave a turn's."""
    object: Literal["approval"] = "approval"
    status: ApprovalStatus
    tool_name: str
    arguments: dict[str, Any] | str
    """The arguments as the call carried them (an approval runs exactly these)."""
    server_label: str | None = None
    """The label of the MCP server whose tool it is (None: not an MCP server's)."""
    agent_id: str | None = None
    session_id: str | None = None
    turn_id: str | None = None
    """The paused turn (None for a response)."""
    response_id: str | None = None
    """The response that ended with the request (None for a turn)."""
    conversation_id: str | None = None
    """The response's conversation, if it has one."""
    call_id: str | None = None
    """The held call's id within its turn (for a response: the request's id)."""
    digest: str | None = None
    """The sha256 binding a decision to exactly these arguments (see :class:`ApprovalRequest`)."""
    created_at: int
    """When the call began waiting (seconds since the epoch)."""
    decided_at: int | None = None
    reason: str | None = None
    """The reason given with the decision."""
    next_response_id: str | None = None
    """For a response: the response the server created to continue it once every request was decided."""


class ApprovalList(BaseModel):
    """One page of approvals."""

    object: Literal["list"] = "list"
    data: list[Approval]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class DecideApprovalRequest(BaseModel):
    """Body of ``POST /v1/approvals/{approval_id}/approve`` or ``…/deny`` (optional)."""

    reason: MessageText | None = None
    """Why (a denial's reason is what the model is told)."""
