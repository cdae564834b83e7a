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
