"""Tools a turn was to offer but could not list (an MCP server that is down), and how the turn says so.

The turn runs without them. What failed is one :class:`UnlistedTools` per
toolgroup (or Responses ``mcp`` server): the model reads it in its system
message (:func:`system_note`), and the engine records it as a
``tool_execution`` step at the start of each run (:func:`unlisted_step`),
whose call lists the group's tools and whose response is the error. The
Agents API shows that step as it is; the Responses API shows the same failure
as a failed ``mcp_list_tools`` item instead, and skips the step.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from datetime import datetime

from ferryman.api.agents import ToolExecutionStep
from ferryman.api.content import ToolCall, ToolResponse
from ferryman.ids import new_id, utcnow

LIST_TOOLS = "list_tools"
"""The tool name of the step's calls: listing a toolgroup's tools, which the server does before the turn."""

UNLISTED_METADATA = "unlisted_toolgroups"
"""The ``step_start`` metadata key naming the toolgroups whose tools could not be listed."""

MAX_REASON_CHARS = 500
"""The most of a failure's reason kept: an MCP server's own error message is in it, and it goes to every
inference of the turn in the system message."""


@dataclass(frozen=True)
class UnlistedTools:
    """A toolgroup whose tools could not be listed for a turn.

    Attributes:
        source: The toolgroup id (the Responses API: the ``mcp`` tool's ``server_label``).
        reason: Why, as the caller may read it (no credentials: URLs without user info or query); kept as
            one line of at most :data:`MAX_REASON_CHARS`.
    """

    source: str
    reason: str

    def __post_init__(self) -> None:
        # One line, bounded: what a failing server says must not add lines of its own to the system message.
        object.__setattr__(self, "reason", textwrap.shorten(self.reason, MAX_REASON_CHARS, placeholder=" …"))

    def describe(self) -> str:
        """The failure in one sentence, as the model and the client read it."""
        return f"the tools of '{self.source}' could not be listed: {self.reason}"


def system_note(unlisted: tuple[UnlistedTools, ...]) -> str:
    """What the model is told of the tools it does not have this turn, so that it can tell the user."""
    lines = "\n".join(f"- {item.describe()}" for item in unlisted)
    return f"Some tools are unavailable in this turn; if the user needs them, say they are unavailable:\n{lines}"


def unlisted_step(
    turn_id: str, step_id: str, started_at: datetime, unlisted: tuple[UnlistedTools, ...]
) -> ToolExecutionStep:
    """The ``tool_execution`` step that records the failed listings: one call and one error response each."""
    calls = [
        ToolCall(call_id=new_id(), tool_name=LIST_TOOLS, arguments={"toolgroup_id": item.source}) for item in unlisted
    ]
    responses = [
        ToolResponse(
            call_id=call.call_id,
            tool_name=LIST_TOOLS,
            content=f"error: {item.describe()}",
            metadata={"error": True, "toolgroup_id": item.source},
        )
        for call, item in zip(calls, unlisted, strict=True)
    ]
    return ToolExecutionStep(
        turn_id=turn_id,
        step_id=step_id,
        started_at=started_at,
        completed_at=utcnow(),
        tool_calls=calls,
        tool_responses=responses,
    )
