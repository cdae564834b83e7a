"""A turn's trace: OpenTelemetry GenAI spans for the turn, its model calls, tool calls, shields and retrieval.

Only OpenTelemetry's API is used here. Until the server installs an SDK tracer provider (telemetry
off, the default) every span is the API's no-op one and nothing below records anything: the attribute
helpers return at once on a span that is not recording.

A turn's ``invoke_agent`` span is started where the turn is accepted (in the request that creates or
resumes it, so that it continues the caller's trace) and made current while the engine runs the turn
in its background task; model, tool, shield and retrieval spans nest under it. A new turn keeps its
span's ids in its record (``overrides["trace"]``, stored with the turn), so that the run that resumes
a paused turn links to the run that paused it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Literal, cast

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ferryman.api.content import (
    CompletionMessage,
    Message,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    content_to_text,
)
from ferryman.errors import FerrymanError
from ferryman.inference.base import ChatChunk, ChatRequest, Usage
from ferryman.turn_records import TurnRecord

from .inference_step import ChatModel

_tracer = trace.get_tracer("ferryman.engine")

TRACE_KEY = "trace"
"""Where a turn's record keeps its first run's span ids (in ``overrides``, stored with the turn)."""

Api = Literal["agents", "responses"]

OPERATION = "gen_ai.operation.name"
ERROR_TYPE = "error.type"
_FINISH_REASONS = {"end_of_turn": "stop", "end_of_message": "tool_calls", "out_of_tokens": "length"}
"""Our stop reasons in the words of OpenAI's ``finish_reason``, which the GenAI conventions use."""


@dataclass
class ContentCapture:
    """Whether spans record what was said (the operator's opt-in), and at most how much of it per attribute."""

    enabled: bool = False
    max_chars: int = 8192


CONTENT = ContentCapture()
"""This process's choice (``telemetry.traces.capture_content``), set when the server starts."""


def start_turn_span(
    record: TurnRecord,
    api: Api,
    conversation_id: str,
    *,
    agent_name: str | None = None,
    response_id: str | None = None,
    resumes: SpanContext | None = None,
) -> Span:
    """Start a turn's ``invoke_agent`` span in the current context (the caller's request), not yet current.

    A new turn (``resumes`` None) keeps the span's ids in ``record.overrides``, to be stored with it.

    Args:
        record: The turn, before it is stored.
        api: Which API runs it.
        conversation_id: The session (Agents API), or the conversation or session (Responses API).
        agent_name: The agent's name, if it has one.
        response_id: The response it runs for (Responses API).
        resumes: The span of the run that paused the turn this run continues: linked.
    """
    attributes: dict[str, Any] = {
        OPERATION: "invoke_agent",
        "gen_ai.conversation.id": conversation_id,
        "ferryman.api": api,
        "ferryman.turn.id": record.turn_id,
    }
    if record.agent_id is not None:
        attributes["gen_ai.agent.id"] = record.agent_id
    if agent_name:
        attributes["gen_ai.agent.name"] = agent_name
    if response_id is not None:
        attributes["gen_ai.response.id"] = response_id
    name = f"invoke_agent {agent_name}" if agent_name else "invoke_agent"
    links = [Link(resumes, {"ferryman.link": "resumes"})] if resumes is not None else None
    span = _tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes, links=links)
    context = span.get_span_context()
    if resumes is None and span.is_recording():
        record.overrides[TRACE_KEY] = {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}
    return span


def paused_span(overrides: Mapping[str, Any]) -> SpanContext | None:
    """The span of the run that started a turn, as :func:`start_turn_span` kept it (None: none kept)."""
    kept = overrides.get(TRACE_KEY)
    if not isinstance(kept, dict):
        return None
    try:
        context = SpanContext(
            int(kept["trace_id"], 16),
            int(kept["span_id"], 16),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    except (KeyError, TypeError, ValueError):
        return None
    return context if context.is_valid else None


@contextmanager
def ended_if_refused(span: Span) -> Iterator[None]:
    """End ``span`` as failed if the block raises: a turn refused before its run (which ends it) started."""
    try:
        yield
    except BaseException as exc:
        if span.is_recording():
            span.set_attribute(ERROR_TYPE, error_type(exc))
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        span.end()
        raise


@contextmanager
def running_turn(span: Span | None, record: TurnRecord) -> Iterator[None]:
    """Make the turn's span current while the engine runs it; end it with the turn's outcome.

    ``span`` None (a turn run without one, as in the engine's own tests): one is started here.
    """
    if span is None:
        span = start_turn_span(record, "agents", record.session_id, resumes=None)
    # What trace.use_span(span, end_on_exit=True) does with exceptions unrecorded: without its layers.
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield
    finally:
        otel_context.detach(token)
        if span.is_recording():
            span.set_attribute("ferryman.turn.status", record.status)
            if record.status == "failed" and record.error is not None:
                span.set_attribute(ERROR_TYPE, str(record.error.code))
                span.set_status(Status(StatusCode.ERROR, record.error.message))
        span.end()


@contextmanager
def operation_span(name: str, attributes: dict[str, Any], kind: SpanKind = SpanKind.INTERNAL) -> Iterator[Span]:
    """A child span of the current one; a failure inside sets its ``error.type`` and status, and propagates."""
    # Tracer.start_as_current_span without its three context-manager layers (a span per model and tool call).
    span = _tracer.start_span(
        name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    )
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield span
    except BaseException as exc:
        if span.is_recording():
            span.set_attribute(ERROR_TYPE, error_type(exc))
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        otel_context.detach(token)
        span.end()


def error_type(exc: BaseException) -> str:
    """A failure in a bounded word: a ferryman failure's code, ``cancelled``, or the exception's class."""
    if isinstance(exc, FerrymanError):
        return str(exc.code)
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return type(exc).__qualname__


def chat_span(request: ChatRequest, model: object) -> AbstractContextManager[Span]:
    """The ``chat`` span of one model call."""
    attributes: dict[str, Any] = {OPERATION: "chat", "gen_ai.request.model": request.model}
    provider = _provider_name(model, request.model)
    if provider is not None:
        attributes["gen_ai.provider.name"] = provider
    if request.sampling.temperature is not None:
        attributes["gen_ai.request.temperature"] = request.sampling.temperature
    if request.sampling.max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = request.sampling.max_tokens
    # A call to a model server: a client span, as the GenAI conventions want it.
    return operation_span(f"chat {request.model}", attributes, SpanKind.CLIENT)


def _provider_name(model: object, model_id: str) -> str | None:
    """The provider serving ``model_id``, when ``model`` tells (the model router's ``provider_name``).

    Looked up, not checked against a runtime Protocol: that check costs microseconds per model call.
    """
    named = getattr(model, "provider_name", None)
    return cast("str | None", named(model_id)) if callable(named) else None


def timed_model(model: ChatModel, span: Span) -> ChatModel:
    """``model``, noting on ``span`` how long its first chunk took (``model`` itself when nothing records)."""
    return _FirstChunkTimed(model, span) if span.is_recording() else model


class _FirstChunkTimed:
    def __init__(self, model: ChatModel, span: Span) -> None:
        self._model, self._span = model, span

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        started = time.perf_counter()
        first = True
        async for chunk in self._model.stream_chat(request):
            if first:
                first = False
                self._span.set_attribute("gen_ai.response.time_to_first_chunk", time.perf_counter() - started)
            yield chunk


def record_chat(span: Span, request: ChatRequest, message: CompletionMessage, usage: Usage | None) -> None:
    """What one model call answered: its finish reason, token counts and (when captured) the messages."""
    if not span.is_recording():
        return
    span.set_attribute("gen_ai.response.finish_reasons", [_FINISH_REASONS.get(message.stop_reason, "stop")])
    if usage is not None:
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
    if CONTENT.enabled:
        span.set_attribute("gen_ai.input.messages", _content([_message(m) for m in request.messages]))
        said = _message(message)
        said["finish_reason"] = _FINISH_REASONS.get(message.stop_reason, "stop")
        span.set_attribute("gen_ai.output.messages", _content([said]))


def tool_span(call: ToolCall) -> AbstractContextManager[Span]:
    """The ``execute_tool`` span of one server tool call."""
    attributes = {
        OPERATION: "execute_tool",
        "gen_ai.tool.name": call.tool_name,
        "gen_ai.tool.call.id": call.call_id,
        "gen_ai.tool.type": "function",
    }
    return operation_span(f"execute_tool {call.tool_name}", attributes)


def record_tool(span: Span, call: ToolCall, response: ToolResponse, failure: str | None) -> None:
    """A tool call's outcome: ``error.type`` when it ``failure``, and (when captured) its arguments and result."""
    if not span.is_recording():
        return
    if failure is not None:
        span.set_attribute(ERROR_TYPE, failure)
        span.set_status(Status(StatusCode.ERROR))
    if CONTENT.enabled:
        span.set_attribute("gen_ai.tool.call.arguments", _cut(call.arguments_json or json.dumps(call.arguments)))
        span.set_attribute("gen_ai.tool.call.result", _cut(content_to_text(response.content)))


def shield_span(shield_id: str, phase: str) -> AbstractContextManager[Span]:
    """The span of one shield's check."""
    return operation_span(f"shield {shield_id}", {"ferryman.shield.id": shield_id, "ferryman.shield.phase": phase})


def judged(span: Span, verdict: str) -> None:
    """A shield's verdict (``pass``, ``redact``, ``warn``, ``block``; ``error``: the shield failed) on its span."""
    span.set_attribute("ferryman.shield.verdict", verdict)
    if verdict == "error":
        span.set_attribute(ERROR_TYPE, "shield_failed")
        span.set_status(Status(StatusCode.ERROR))


def retrieval_span(query: str) -> AbstractContextManager[Span]:
    """The span of a turn's memory retrieval."""
    attributes: dict[str, Any] = {OPERATION: "retrieval"}
    if CONTENT.enabled:
        attributes["gen_ai.retrieval.query.text"] = _cut(query)
    return operation_span("retrieval", attributes)


def _message(message: Message) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if isinstance(message, ToolResponseMessage):
        response = content_to_text(message.content)
        parts.append({"type": "tool_call_response", "id": message.call_id, "response": response})
    else:
        text = content_to_text(message.content)
        if text:
            parts.append({"type": "text", "content": text})
    if isinstance(message, CompletionMessage):
        parts += [
            {"type": "tool_call", "id": c.call_id, "name": c.tool_name, "arguments": c.arguments}
            for c in message.tool_calls or []
        ]
    return {"role": message.role, "parts": parts}


def _content(messages: list[dict[str, Any]]) -> str:
    return _cut(json.dumps(messages, ensure_ascii=False, default=str))


def _cut(text: str) -> str:
    limit = CONTENT.max_chars
    if len(text) <= limit:
        return text
    return f"{text[:limit]}[cut: {len(text)} characters, telemetry.traces.max_content_chars is {limit}]"
