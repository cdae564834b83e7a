"""The engine's own events, and the two encoders that turn them into the Agents API's and the Responses API's."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ferryman.api.agents import InferenceStep, Turn, TurnEvent, TurnStreamChunk
from ferryman.api.content import CompletionMessage, UserMessage
from ferryman.api.response_events import OutputTextDelta
from ferryman.api.responses import Response as ResponseObject
from ferryman.engine.events import (
    EngineEvent,
    StepCompleted,
    StepStarted,
    TextDelta,
    ToolCallArgumentsDelta,
    ToolCallDone,
    ToolCallStarted,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from ferryman.engine.inference_step import run_inference
from ferryman.errors import FailureCode
from ferryman.inference.base import ChatChunk, ChatRequest, FinishChunk, TextChunk, ToolCallChunk
from ferryman.server.http import event_stream
from ferryman.services.responses.stream import ResponseEncoder
from ferryman.services.turn_stream import event_payload, turn_event_data
from ferryman.storage.base import StoredEvent
from sse import Frame, aframes

pytestmark = pytest.mark.anyio

ARGUMENT_PIECES = ['{"ci', 'ty": "Pa', 'ris"}']


class PiecewiseModel:
    """A model that says a word, then calls a tool with its arguments in pieces, as providers stream them."""

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        yield TextChunk("Let me look.")
        yield ToolCallChunk(index=0, call_id="call_1", name="get_weather")
        for piece in ARGUMENT_PIECES:
            yield ToolCallChunk(index=0, arguments=piece)
        yield FinishChunk(stop_reason="end_of_message")


async def _inference_events() -> list[EngineEvent]:
    events: list[EngineEvent] = [TurnStarted("turn_1")]

    async def emit(event: EngineEvent) -> None:
        events.append(event)

    result = await run_inference(PiecewiseModel(), ChatRequest(model="m", messages=[]), "step_1", emit)
    assert result.message.tool_calls and result.message.tool_calls[0].arguments == {"city": "Paris"}
    return events


def _response() -> ResponseObject:
    return ResponseObject(id="resp_1", created_at=int(time.time()), status="in_progress", model="m")


async def test_the_engine_emits_each_argument_piece_as_it_comes() -> None:
    events = await _inference_events()
    deltas = [e.delta for e in events if isinstance(e, ToolCallArgumentsDelta)]
    assert deltas == ARGUMENT_PIECES
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    done = [e for e in events if isinstance(e, ToolCallDone)]
    assert [(s.call_id, s.name) for s in started] == [("call_1", "get_weather")]
    assert [(d.call.call_id, d.parsed) for d in done] == [("call_1", True)]


async def test_responses_stream_function_call_arguments_as_the_model_produces_them() -> None:
    encoder = ResponseEncoder(_response(), {"get_weather"})
    data: list[str] = []
    for event in await _inference_events():
        data += encoder.encode(event, len(data))
    decoded = [json.loads(item) for item in data]
    assert [d["sequence_number"] for d in decoded] == list(range(len(decoded)))
    kinds = [d["type"] for d in decoded]
    call_events = kinds[kinds.index("response.output_item.done") + 1 :]
    assert call_events == [
        "response.output_item.added",
        *["response.function_call_arguments.delta"] * len(ARGUMENT_PIECES),
        "response.function_call_arguments.done",
        "response.output_item.done",
    ]
    calls = decoded[-len(call_events) :]
    assert [d["delta"] for d in calls[1:-2]] == ARGUMENT_PIECES
    assert calls[-2]["arguments"] == "".join(ARGUMENT_PIECES) and calls[-2]["name"] == "get_weather"
    assert calls[0]["item"]["status"] == "in_progress" and calls[-1]["item"]["status"] == "completed"
    assert calls[0]["item"]["id"] == calls[-1]["item"]["id"] == calls[1]["item_id"]
    # Llama Stack's client drops item and part events without the response's id.
    assert all(
        d["response_id"] == "resp_1" for d in decoded if ".output_item." in d["type"] or ".content_part." in d["type"]
    )
    assert [item.type for item in encoder.response.output] == ["message", "function_call"]


async def test_the_agents_stream_reports_tool_call_progress_as_before() -> None:
    deltas = []
    for event in await _inference_events():
        payload = json.loads(turn_event_data(event)[0])["event"]["payload"]
        if payload["event_type"] == "step_progress" and payload["delta"]["type"] == "tool_call":
            deltas.append((payload["delta"]["parse_status"], payload["delta"]["tool_call"]))
    assert [status for status, _ in deltas] == ["started", "in_progress", "in_progress", "in_progress", "succeeded"]
    assert [call for _, call in deltas[1:-1]] == ARGUMENT_PIECES
    assert deltas[-1][1]["arguments"] == {"city": "Paris"}


async def test_the_agents_stream_writes_each_event_as_its_models_would() -> None:
    """The stream's envelope and its text deltas are written without models: byte for byte the models' JSON."""
    answer = CompletionMessage(content='Voilà "là"\n\t\u2028 \x01 🙂')
    step = InferenceStep(turn_id="turn_1", step_id="step_1", model_response=answer)
    turn = Turn(
        turn_id="turn_1",
        session_id="session_1",
        input_messages=[UserMessage(content="hi")],
        steps=[step],
        output_message=answer,
        started_at=step.started_at or datetime.now(UTC),
    )
    texts = ["", "plain", 'Voilà "là" \\ /', "\n\r\t\b\f \x00\x1f\x7f", "\u2028\u2029 \ufeff 🙂 中文"]
    events: list[EngineEvent] = [
        *await _inference_events(),
        *(TextDelta("step_1", text) for text in texts),
        TextDelta("step_1", "".join(chr(code) for code in range(0xD800))),
        StepStarted("shield_call", "step_2", {"shield_id": "s", "nested": {"n": [1, 2.5, None, True]}}),
        StepCompleted(step),
        TurnCompleted(turn),
    ]
    for event in events:
        expected = TurnStreamChunk(event=TurnEvent(payload=event_payload(event))).model_dump_json()
        assert turn_event_data(event) == [expected]


async def test_a_response_stream_writes_text_deltas_as_their_model_would() -> None:
    encoder = ResponseEncoder(_response(), set())
    data = encoder.encode(TurnStarted("turn_1"), 0)
    texts = ["", "plain", 'Voilà "là" \\ /', "\n\r\t\b\f \x00\x1f\x7f", "\u2028\u2029 \ufeff 🙂 中文"]
    for text in [*texts, "".join(chr(code) for code in range(0xD800))]:
        data += encoder.encode(TextDelta("step_1", text), len(data))
    deltas = [item for item in data if '"response.output_text.delta"' in item]
    assert len(deltas) == len(texts) + 1
    for item in deltas:
        fields = json.loads(item)
        assert item == OutputTextDelta(**{k: v for k, v in fields.items() if k != "type"}).model_dump_json()
    assert [json.loads(item)["sequence_number"] for item in data] == list(range(len(data)))


async def test_a_cancelled_turn_ends_a_response_stream_cancelled() -> None:
    encoder = ResponseEncoder(_response(), set())
    first = encoder.encode(TurnStarted("turn_1"), 0)
    last = encoder.encode(TurnFailed("turn_1", FailureCode.CANCELLED, "stop"), len(first))
    assert [json.loads(item)["type"] for item in first + last] == [
        "response.created",
        "response.in_progress",
        "response.cancelled",
    ]
    assert encoder.response.status == "cancelled"


async def _numbered(events: list[StoredEvent]) -> AsyncIterator[StoredEvent]:
    for event in events:
        yield event


async def test_sse_frames_carry_the_number_and_for_responses_the_type() -> None:
    turn = [StoredEvent(4, '{"event":{}}')]
    response = [StoredEvent(0, '{"sequence_number":0,"type":"response.created"}')]

    async def turns(request: Request) -> Response:
        return event_stream(_numbered(turn))

    async def responses(request: Request) -> Response:
        return event_stream(_numbered(response), named=True)

    app = Starlette(routes=[Route("/turn", turns), Route("/response", responses)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        answer = await http.get("/turn")
        assert answer.text == 'id: 4\ndata: {"event":{}}\n\n'
        assert answer.headers["cache-control"] == "no-cache"
        assert answer.headers["x-accel-buffering"] == "no"
        assert answer.headers["content-type"].startswith("text/event-stream")
        answer = await http.get("/response")
        assert answer.text == f"id: 0\nevent: response.created\ndata: {response[0].data}\n\n"
        async with http.stream("GET", "/response") as streamed:
            read = [frame async for frame in aframes(streamed)]
        assert read == [Frame("0", "response.created", response[0].data)]
