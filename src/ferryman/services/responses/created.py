"""A ``POST /v1/responses`` request checked, and the response it starts as (before its run)."""

from __future__ import annotations

import time

from ferryman.api.responses import ConversationRef, CreateResponseRequest, McpTool, Response, TextConfig
from ferryman.errors import InvalidRequestError


def validate_request(request: CreateResponseRequest) -> None:
    """Refuse what no response can be made of, whatever the store holds.

    Raises:
        InvalidRequestError: both ``previous_response_id`` and ``conversation``; or ``background`` unstored.
    """
    if request.previous_response_id and request.conversation:
        raise InvalidRequestError("previous_response_id and conversation cannot be used together", "conversation")
    if request.background and request.store is False:
        raise InvalidRequestError("a background response must be stored (store: true)", "store")


def initial_response(
    response_id: str, request: CreateResponseRequest, conversation_id: str | None, queued: bool = False
) -> Response:
    """The response as created, before its run: ``queued`` when it runs in the background or waits its turn
    in its conversation (``queued``), else ``in_progress``; MCP tools shown without their credentials."""
    return Response(
        id=response_id,
        created_at=int(time.time()),
        status="queued" if request.background or queued else "in_progress",
        model=request.model,
        instructions=request.instructions,
        tools=[tool.without_credentials() if isinstance(tool, McpTool) else tool for tool in request.tools],
        tool_choice=request.tool_choice,
        parallel_tool_calls=request.parallel_tool_calls is not False,
        max_tool_calls=request.max_tool_calls,
        max_output_tokens=request.max_output_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        text=request.text or TextConfig(),
        metadata=request.metadata or {},
        previous_response_id=request.previous_response_id,
        conversation=ConversationRef(id=conversation_id) if conversation_id else None,
        background=bool(request.background),
        store=request.store is not False,
        truncation=request.truncation or "disabled",
    )
