"""Engine events as the Agents API's turn stream: each event's JSON, as the ``data`` of one SSE event."""

from __future__ import annotations

import json

import orjson

from ferryman.api.agents import (
    EventPayload,
    StepCompletePayload,
    StepProgressPayload,
    StepStartPayload,
    ToolCallDelta,
    Turn,
    TurnAwaitingInputPayload,
    TurnCompletePayload,
    TurnStartPayload,
    TurnStreamChunk,
    TurnStreamError,
    TurnStreamFailure,
)
from ferryman.api.agents import TextDelta as TextContentDelta
from ferryman.engine.events import (
    EngineEvent,
    HistoryCompacted,
    StepCompleted,
    StepStarted,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallDone,
    ToolCallStarted,
    TurnAwaitingInput,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from ferryman.errors import FerrymanError, error_for_code
from ferryman.turn_records import StoredEvent


def turn_event_data(event: EngineEvent, seq: int = 0) -> list[str]:
    """The stream events (JSON) one engine event becomes; a failure becomes an ``error`` object.

    ``seq`` (the event's number) is not part of the Agents API's JSON: the SSE ``id`` carries it. A compaction
    has no event of its own: the inference step it came before says it (``context_management``).
    """
    if isinstance(event, HistoryCompacted):
        return []
    if isinstance(event, TurnFailed):
        failure = TurnStreamFailure(code=event.code, message=event.message, turn_id=event.turn_id)
        return [TurnStreamError(error=failure).model_dump_json()]
    if isinstance(event, TextDelta):
        # A turn's most frequent event, written without models: the bytes ``TurnStreamChunk`` would give.
        return [_enveloped(orjson.dumps(_text_progress(event)).decode())]
    return [_enveloped(event_payload(event).model_dump_json())]


def _enveloped(payload: str) -> str:
    """A payload's JSON inside the stream chunk's envelope, as ``TurnStreamChunk(event=TurnEvent(...))`` writes
    it (building those two models cost more than encoding the payload)."""
    return f'{{"event":{{"payload":{payload}}}}}'


def _text_progress(event: TextDelta) -> dict[str, object]:
    """A text delta as ``StepProgressPayload`` dumps it, its fields in the model's order."""
    delta = {"type": "text", "text": event.text}
    return {"event_type": "step_progress", "step_type": "inference", "step_id": event.step_id, "delta": delta}


def ends_run(event: StoredEvent) -> bool:
    """Whether a stored turn stream event is the last of its run: the turn completed, paused or failed."""
    data = json.loads(event.data)
    if "error" in data:
        return True
    return data.get("event", {}).get("payload", {}).get("event_type") in ("turn_complete", "turn_awaiting_input")


def failed_turn(turn_id: str, code: str, message: str) -> FerrymanError:
    """The error that answers a request which did not stream, when its turn failed."""
    return error_for_code(code, f"turn {turn_id} failed: {message}")


def run_answer(event: StoredEvent) -> Turn:
    """The turn the last event of a run carries (see :func:`ends_run`): what a request that did not stream was
    answered when that run ended.

    Raises:
        FerrymanError: the run failed (the error :func:`failed_turn` makes of it).
    """
    data = json.loads(event.data)
    if "error" in data:
        failure = TurnStreamError.model_validate(data).error
        raise failed_turn(failure.turn_id, failure.code, failure.message)
    payload = TurnStreamChunk.model_validate(data).event.payload
    if not isinstance(payload, TurnCompletePayload | TurnAwaitingInputPayload):
        raise TypeError(f"not the last event of a run: {payload.event_type}")
    return payload.turn


def event_payload(event: EngineEvent) -> EventPayload:
    # A new kind of engine event gets its Agents API form here.
    match event:
        case TextDelta(step_id=step_id, text=text):
            return StepProgressPayload(step_type="inference", step_id=step_id, delta=TextContentDelta(text=text))
        case ToolCallStarted(step_id=step_id):
            return _tool_progress(step_id, ToolCallDelta(tool_call="", parse_status="started"))
        case ToolCallArgumentsDelta(step_id=step_id, delta=delta):
            return _tool_progress(step_id, ToolCallDelta(tool_call=delta, parse_status="in_progress"))
        case ToolCallDone(step_id=step_id, call=call, parsed=parsed):
            status = "succeeded" if parsed else "failed"
            return _tool_progress(step_id, ToolCallDelta(tool_call=call, parse_status=status))
        case TurnStarted(turn_id=turn_id):
            return TurnStartPayload(turn_id=turn_id)
        case StepStarted(step_type=step_type, step_id=step_id, metadata=metadata):
            return StepStartPayload(step_type=step_type, step_id=step_id, metadata=metadata)
        case StepCompleted(step=step):
            return StepCompletePayload(step_type=step.step_type, step_id=step.step_id, step_details=step)
        case TurnCompleted(turn=turn):
            return TurnCompletePayload(turn=turn)
        case TurnAwaitingInput(turn=turn):
            return TurnAwaitingInputPayload(turn=turn)
    raise TypeError(f"no Agents API form for {event!r}")


def _tool_progress(step_id: str, delta: ToolCallDelta) -> StepProgressPayload:
    return StepProgressPayload(step_type="inference", step_id=step_id, delta=delta)
