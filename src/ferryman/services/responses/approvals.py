"""Approvals on the Responses API: held calls end a response as ``mcp_approval_request`` items.

A hosted tool whose ``require_approval`` holds a call back does not run it: the
response ends with an ``mcp_approval_request`` item instead (its
``server_label`` is the MCP tool's label, or ``"ferryman"`` for other hosted
tools). A later response, in the same conversation or continuing the
``previous_response_id`` chain, answers it with an ``mcp_approval_response``
input item; the engine then runs the approved call first, with the arguments
stored in the request item (never arguments the client sends), or tells the
model it was denied. The held call enters the history only then, together
with its result, under the request item's id.
"""

from __future__ import annotations

from ferryman.api.content import ToolCall
from ferryman.api.responses import Item, McpApprovalRequestItem, McpApprovalResponseItem
from ferryman.engine.approvals import Ruling
from ferryman.errors import InvalidRequestError
from ferryman.inference.openai_wire import parse_arguments

from .ids import new_item_id

DEFAULT_LABEL = "ferryman"
"""The ``server_label`` of approval requests of hosted tools that are not MCP servers'."""


def approval_item(call: ToolCall, server_label: str | None) -> McpApprovalRequestItem:
    """The item that asks the client to approve a held call."""
    return McpApprovalRequestItem(
        id=new_item_id("mcp_approval_request"),
        server_label=server_label or DEFAULT_LABEL,
        name=call.tool_name,
        arguments=call.arguments_json or "{}",
    )


def has_answers(items: list[Item]) -> bool:
    """Whether the input answers approval requests."""
    return any(isinstance(item, McpApprovalResponseItem) for item in items)


def rule_answers(items: list[Item], stored: list[Item]) -> Ruling | None:
    """The calls the input approves or denies, as stored in the earlier responses' request items.

    Args:
        items: The new response's input items.
        stored: The items of the conversation, or of the ``previous_response_id`` chain (never the input:
            a request item the client sends is not trusted).

    Raises:
        InvalidRequestError: an answer names no stored request, one already answered, or one answered twice.
    """
    answers = [item for item in items if isinstance(item, McpApprovalResponseItem)]
    if not answers:
        return None
    requests = {item.id: item for item in stored if isinstance(item, McpApprovalRequestItem)}
    answered = {item.approval_request_id for item in stored if isinstance(item, McpApprovalResponseItem)}
    ruling = Ruling([], [])
    for answer in answers:
        request_id = answer.approval_request_id
        request = requests.get(request_id)
        if request is None:
            raise InvalidRequestError(f"no approval request '{request_id}' waits in this conversation", "input")
        if request_id in answered:
            raise InvalidRequestError(f"approval request '{request_id}' is already answered", "input")
        answered.add(request_id)
        call = ToolCall(
            call_id=request_id,
            tool_name=request.name,
            arguments=parse_arguments(request.arguments),
            arguments_json=request.arguments,
        )
        if answer.approve:
            ruling.approved.append(call)
        else:
            ruling.denied.append((call, answer.reason))
    return ruling
