"""The trace link of a response that continues a paused one: the span of the response whose calls it answers."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import SpanContext

from ferryman.api.responses import CreateResponseRequest, FunctionCallOutputItem, Item, McpApprovalResponseItem
from ferryman.engine.tracing import paused_span
from ferryman.errors import NotFoundError
from ferryman.storage.base import Store


async def paused_response_span(store: Store, request: CreateResponseRequest, items: list[Item]) -> SpanContext | None:
    """The ``invoke_agent`` span of ``previous_response_id`` when the input answers its calls, to link to.

    Read only while the request is traced (nothing else uses it); a response in a conversation is not
    linked (which earlier response paused is not looked for).
    """
    previous_id = request.previous_response_id
    if previous_id is None or not trace.get_current_span().is_recording():
        return None
    if not any(isinstance(item, FunctionCallOutputItem | McpApprovalResponseItem) for item in items):
        return None
    try:
        previous = await store.get_response(previous_id)
        turn = await store.get_turn_record(previous.session_id, previous.turn_id)
    except NotFoundError:
        return None
    return paused_span(turn.overrides)
