"""Engine events as an OpenAI Responses stream, numbered, recorded for replay."""

from __future__ import annotations

import json
from typing import Any

from ferryman.api.agents import (
    EventPayload,
    InferenceStep,
    StepCompletePayload,
    StepProgressPayload,
    TextDelta,
    TurnCompletePayload,
    TurnStartPayload,
)
from ferryman.api.content import content_to_text
from ferryman.api.responses import MessageItem, OutputText, Response, ResponseError, Usage
from ferryman.engine.events import EngineEvent, TurnFailed
from ferryman.errors import FailureCode

from ..host import Publish
from .items import call_item, message_item, new_item_id

# Llama Stack's Responses stream carries the response's id on these events, and its
# client (llama-stack-client 0.7.5) drops any event it cannot validate without it;
# OpenAI's SDK ignores the extra field.
_WITH_RESPONSE_ID = frozenset(
    {
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
    }
)


class ResponseRecorder:
    """Builds a response from engine events and publishes its stream events.

    Every event gets the next ``sequence_number`` and is kept, serialised, so
    that a client can replay the stream from any point.

    Args:
        response: The response as created (status ``in_progress`` or ``queued``).
        client_tools: Names of the function tools, whose calls become output items.
        publish: Where each serialised event goes (the live channel).
    """

    def __init__(self, response: Response, client_tools: set[str], publish: Publish) -> None:
        self.response = response
        self.events: list[str] = []
        self._client_tools = client_tools
        self._publish = publish
        self._started = False
        self._open: tuple[int, str, list[str]] | None = None

    async def emit(self, event_type: str, **fields: Any) -> None:
        """Number, record and publish one event, as a complete SSE frame.

        The frame's ``id:`` is its sequence number, so that a client that lost
        the stream can come back with ``Last-Event-ID`` as with ``starting_after``.
        """
        seq = len(self.events)
        body = {"type": event_type, "sequence_number": seq, **fields}
        if event_type in _WITH_RESPONSE_ID:
            body["response_id"] = self.response.id
        frame = f"id: {seq}\nevent: {event_type}\ndata: {json.dumps(body, default=_jsonable)}\n\n"
        self.events.append(frame)
        await self._publish(seq, frame)

    async def on_event(self, event: EngineEvent) -> None:
        """Translate one engine event."""
        if isinstance(event, TurnFailed):
            await self._fail(event)
        else:
            await self._on_payload(event)

    async def _on_payload(self, payload: EventPayload) -> None:
        if isinstance(payload, TurnStartPayload) and not self._started:
            self._started = True
            await self.emit("response.created", response=self._snapshot())
            self.response.status = "in_progress"
            await self.emit("response.in_progress", response=self._snapshot())
        elif isinstance(payload, StepProgressPayload) and isinstance(payload.delta, TextDelta):
            await self._text(payload.delta.text)
        elif isinstance(payload, StepCompletePayload) and isinstance(payload.step_details, InferenceStep):
            await self._inference_done(payload.step_details)
        elif isinstance(payload, TurnCompletePayload):
            await self._finish(payload)

    async def _text(self, delta: str) -> None:
        if self._open is None:
            item_id, index = new_item_id("message"), len(self.response.output)
            item = MessageItem(id=item_id, role="assistant", content=[], status="in_progress")
            self.response.output.append(item)
            self._open = (index, item_id, [])
            await self.emit("response.output_item.added", output_index=index, item=item)
            part = OutputText(text="")
            await self.emit(
                "response.content_part.added", item_id=item_id, output_index=index, content_index=0, part=part
            )
        index, item_id, parts = self._open
        parts.append(delta)
        await self.emit(
            "response.output_text.delta",
            item_id=item_id,
            output_index=index,
            content_index=0,
            delta=delta,
            logprobs=[],
        )

    async def _close_text(self) -> None:
        if self._open is None:
            return
        index, item_id, parts = self._open
        self._open = None
        text = "".join(parts)
        ids = {"item_id": item_id, "output_index": index, "content_index": 0}
        await self.emit("response.output_text.done", text=text, logprobs=[], **ids)
        await self.emit("response.content_part.done", part=OutputText(text=text), **ids)
        item = message_item(text, item_id)
        self.response.output[index] = item
        await self.emit("response.output_item.done", output_index=index, item=item)

    async def _inference_done(self, step: InferenceStep) -> None:
        await self._close_text()
        if step.usage is not None:
            usage = self.response.usage or Usage()
            usage.input_tokens += step.usage.input_tokens
            usage.output_tokens += step.usage.output_tokens
            usage.total_tokens = usage.input_tokens + usage.output_tokens
            self.response.usage = usage
        for call in step.model_response.tool_calls or []:
            if call.tool_name in self._client_tools:
                await self._function_call(call_item(call))

    async def _function_call(self, item: Any) -> None:
        index = len(self.response.output)
        self.response.output.append(item)
        pending = item.model_copy(update={"arguments": "", "status": "in_progress"})
        await self.emit("response.output_item.added", output_index=index, item=pending)
        ids = {"item_id": item.id, "output_index": index}
        await self.emit("response.function_call_arguments.delta", delta=item.arguments, **ids)
        await self.emit("response.function_call_arguments.done", arguments=item.arguments, name=item.name, **ids)
        await self.emit("response.output_item.done", output_index=index, item=item)

    async def _finish(self, payload: TurnCompletePayload) -> None:
        await self._close_text()
        message = payload.turn.output_message
        if message.stop_reason == "out_of_tokens":
            reason = "max_iterations" if message.tool_calls else "max_output_tokens"
            self.response.status, self.response.incomplete_details = "incomplete", {"reason": reason}
            await self.emit("response.incomplete", response=self._snapshot())
            return
        if not self.response.output and content_to_text(message.content):
            self.response.output.append(message_item(content_to_text(message.content)))
        self.response.status = "completed"
        await self.emit("response.completed", response=self._snapshot())

    async def _fail(self, failure: TurnFailed) -> None:
        await self._close_text()
        self.response.error = ResponseError(code=failure.code, message=failure.message)
        if failure.code == FailureCode.CANCELLED:
            self.response.status = "cancelled"
            await self.emit("response.cancelled", response=self._snapshot())
        else:
            self.response.status = "failed"
            await self.emit("response.failed", response=self._snapshot())

    async def fail_abandoned(self, recorded: list[str], message: str) -> None:
        """Continue the stream a dead replica left (its ``recorded`` frames) with the response's failure."""
        self.events = list(recorded)
        await self._fail(TurnFailed("", FailureCode.INTERRUPTED, message))

    def _snapshot(self) -> dict[str, Any]:
        return self.response.model_dump(mode="json")


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    raise TypeError(f"cannot serialise {type(value).__name__}")
