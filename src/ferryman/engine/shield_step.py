"""Shield steps: every safety check of a turn, run fail-closed and kept as a ``shield_call`` step.

A turn checks four things, each with its own list of shields (see :class:`~ferryman.engine.plan.TurnPlan`):

- ``input``: the turn's new messages, before anything else runs (no retrieval, no inference, no tool);
- ``output``: the final answer, before any of it reaches the client (its text is withheld meanwhile);
- ``tool_input``: a server tool call's arguments, before the tool runs;
- ``tool_output``: a tool's result (a server tool's, or a client tool's on resume), before the model reads it.

Each shield's check is one stored step with its verdict (the violation, or none). A shield that
raises, answers something unusable or outlasts its ``timeout_seconds`` blocks, with a generic
message and metadata that says why (never the exception's text), unless it is configured
``fail_open``: then the failure is recorded as a ``warn`` and the turn goes on.

A redacting input verdict replaces the turn's input in the history the model reads
(and the output shields judge), and wherever the input as sent was stored when the
turn started, before any shield ran: the turn's record and history messages, and a
response's input items (see ``kept_input.py``); a blocking one puts placeholders
there instead (``ferryman/withheld.py``). Output shields judge every text the model
says: the final answer, and text said beside tool calls (a blocked one ends the turn
before its calls run). The tool input shields judge a step's server calls before the
step is kept anywhere (:func:`screen_calls`), so that a blocked call's arguments are
withheld in the history and the steps, never stored; with them, the step's call
events are held until then.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Literal

from ferryman.api.agents import SafetyViolation, ShieldCallStep
from ferryman.api.content import (
    CompletionMessage,
    Message,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    content_to_text,
)
from ferryman.ids import new_id, utcnow
from ferryman.inference.openai_wire import parse_arguments
from ferryman.metrics import instruments as metrics
from ferryman.safety.base import Shield, ShieldVerdict
from ferryman.tools.context import ToolContext
from ferryman.withheld import kept_for_review, withheld_call

from .events import Emit, EngineEvent, StepStarted, TextDelta, ToolCallArgumentsDelta, ToolCallDone, ToolCallStarted
from .plan import TurnPlan
from .tool_step import run_server_tools
from .tracing import judged, shield_span

log = logging.getLogger(__name__)

ShieldPhase = Literal["input", "output", "tool_input", "tool_output"]
"""What a shield step checks (the ``phase`` of its ``step_start`` metadata)."""

UNCHECKED_MESSAGE = "This request could not be checked for safety, so it was not carried out."
"""What the caller reads when a fail-closed shield failed: nothing of the failure's internals."""

REFUSAL_MESSAGE = "I can't help with that request."
"""The answer of a blocking violation that carries no ``user_message``."""

SaveStep = Callable[[ShieldCallStep], Awaitable[None]]
"""Stores a completed shield step, keeps it with the turn's steps and announces it."""

Check = Callable[[list[Shield], list[Message], ShieldPhase], Awaitable["Screened"]]
"""Runs shields over messages as the turn's steps (:func:`screen`, bound to a turn)."""


@dataclass(frozen=True)
class Screened:
    """What the shields of one check made of the messages.

    Attributes:
        messages: The messages as the turn goes on with them (a redacting shield's form, else as given).
        blocking: The first ``error`` violation, which stopped the check; None: the messages passed.
    """

    messages: list[Message]
    blocking: SafetyViolation | None = None


async def screen(
    shields: list[Shield],
    messages: list[Message],
    phase: ShieldPhase,
    turn_id: str,
    save: SaveStep,
    emit: Emit,
    keep_blocked: bool = False,
) -> Screened:
    """Run ``shields`` in order over ``messages``, each as a stored ``shield_call`` step.

    A redacting verdict's messages are what the next shield (and the turn) sees;
    the first blocking violation ends the check. With ``keep_blocked``, a blocking
    step's violation keeps the messages as given, for review (``ferryman/withheld.py``).
    """
    given = messages
    for shield in shields:
        step_id, started = new_id(), utcnow()
        await emit(StepStarted("shield_call", step_id, {"shield": shield.shield_id, "phase": phase}))
        with shield_span(shield.shield_id, phase) as span:
            verdict = await _verdict(shield, messages)
            if span.is_recording():
                judged(span, _word(verdict))
        metrics.shield_judged(shield.shield_id, _word(verdict))
        if verdict.redacted is not None:
            messages = verdict.redacted
        violation = verdict.violation
        if keep_blocked and violation is not None and violation.violation_level == "error":
            violation = kept_for_review(violation, given)
        step = ShieldCallStep(
            turn_id=turn_id, step_id=step_id, started_at=started, completed_at=utcnow(), violation=violation
        )
        await save(step)
        if violation is not None and violation.violation_level == "error":
            return Screened(messages, violation)
    return Screened(messages)


async def _verdict(shield: Shield, messages: list[Message]) -> ShieldVerdict:
    """The shield's verdict, or the one its failure gives (fail-closed unless the shield is ``fail_open``)."""
    try:
        async with asyncio.timeout(shield.timeout_seconds) as deadline:
            verdict = await shield.run(list(messages), {})
    except TimeoutError:
        if not deadline.expired():
            log.exception("shield %s failed", shield.shield_id)
        return ShieldVerdict(_failure(shield, "timeout" if deadline.expired() else "error"))
    except Exception:
        log.exception("shield %s failed", shield.shield_id)
        return ShieldVerdict(_failure(shield, "error"))
    if verdict.redacted is not None and len(verdict.redacted) != len(messages):
        log.error("shield %s redacted %d messages into %d", shield.shield_id, len(messages), len(verdict.redacted))
        return ShieldVerdict(_failure(shield, "error"))
    return verdict


def _word(verdict: ShieldVerdict) -> metrics.Verdict:
    """The verdict as the shield-verdicts metric names it."""
    violation = verdict.violation
    if violation is not None and "shield_failure" in (violation.metadata or {}):
        return "error"
    if violation is not None and violation.violation_level == "error":
        return "block"
    if violation is not None and violation.violation_level == "warn":
        return "warn"
    return "redact" if verdict.redacted is not None else "pass"


def _failure(shield: Shield, reason: Literal["timeout", "error"]) -> SafetyViolation:
    metadata = {"shield_id": shield.shield_id, "shield_failure": reason, "fail_open": shield.fail_open}
    if shield.fail_open:
        return SafetyViolation(violation_level="warn", user_message=None, metadata=metadata)
    return SafetyViolation(violation_level="error", user_message=UNCHECKED_MESSAGE, metadata=metadata)


async def screen_calls(
    calls: list[ToolCall], shields: list[Shield], check: Check
) -> tuple[dict[str, ToolCall], dict[str, ToolResponse]]:
    """Judge each call's arguments with the tool input ``shields``, before the call is kept or run.

    Returns:
        Each call as the turn keeps it (a redacting shield's arguments, or withheld ones for a
        blocked call), and the note the model reads of each blocked call (which never runs), by call id.
    """
    kept: dict[str, ToolCall] = {}
    blocked: dict[str, ToolResponse] = {}
    for call in calls:
        screened = await check(shields, [call_message(call)], "tool_input")
        if screened.blocking is not None:
            blocked[call.call_id] = blocked_call(call, screened.blocking)
            kept[call.call_id] = withheld_call(call)
        else:
            kept[call.call_id] = screened_call(call, screened.messages[0])
    return kept, blocked


async def run_shielded_tools(
    calls: list[ToolCall], plan: TurnPlan, context: ToolContext, check: Check
) -> list[ToolResponse]:
    """Run server tool calls whose arguments passed (:func:`screen_calls`); their results judged before the model.

    A blocked result is replaced by a note.
    """
    return await screen_results(await run_server_tools(calls, plan, context), plan.tool_output_shields, check)


async def screen_results(responses: list[ToolResponse], shields: list[Shield], check: Check) -> list[ToolResponse]:
    """Tools' results as the model may read them: each judged by ``shields``, a blocked one replaced by a note."""
    if not shields:
        return responses
    checked: list[ToolResponse] = []
    for response in responses:
        screened = await check(shields, [result_message(response)], "tool_output")
        if screened.blocking is not None:
            response = blocked_result(response, screened.blocking)
        else:
            response = response.model_copy(update={"content": screened.messages[0].content})
        checked.append(response)
    return checked


def refusal(violation: SafetyViolation) -> CompletionMessage:
    """The answer of a turn a violation blocked: the violation's ``user_message``."""
    return CompletionMessage(
        content=violation.user_message or REFUSAL_MESSAGE, stop_reason="end_of_turn", tool_calls=[]
    )


def call_message(call: ToolCall) -> CompletionMessage:
    """A tool call as the message a shield checks: its arguments as the text, the call itself attached."""
    return CompletionMessage(content=call.arguments_json or "{}", stop_reason="end_of_message", tool_calls=[call])


def screened_call(call: ToolCall, message: Message) -> ToolCall:
    """The call with the arguments a redacting shield left (as text: a non-object is refused by the tool step)."""
    text = content_to_text(message.content)
    if text == (call.arguments_json or "{}"):
        return call
    return call.model_copy(update={"arguments": parse_arguments(text), "arguments_json": text})


def result_message(response: ToolResponse) -> ToolResponseMessage:
    """A tool's result as the message a shield checks."""
    return ToolResponseMessage(call_id=response.call_id, content=response.content)


def blocked_call(call: ToolCall, violation: SafetyViolation) -> ToolResponse:
    """What the model reads of a call a shield kept from running."""
    reason = violation.user_message or "the call was blocked by a safety shield"
    note = f"error: this call of '{call.tool_name}' was not run: {reason}"
    return ToolResponse(call_id=call.call_id, tool_name=call.tool_name, content=note, metadata=_blocked(violation))


def blocked_result(response: ToolResponse, violation: SafetyViolation) -> ToolResponse:
    """A tool's result a shield blocked, replaced by a note the model reads."""
    reason = violation.user_message or "the result was blocked by a safety shield"
    note = f"error: the result of '{response.tool_name}' was withheld: {reason}"
    metadata = {**(response.metadata or {}), **_blocked(violation)}
    return response.model_copy(update={"content": note, "metadata": metadata})


def _blocked(violation: SafetyViolation) -> dict[str, object]:
    return {"error": True, "blocked_by_shield": violation.metadata.get("shield_id", True)}


_CALL_EVENTS = (ToolCallStarted, ToolCallArgumentsDelta, ToolCallDone)


class Withheld:
    """An inference step's events, held back while shields judge what the step said.

    With ``hold``, everything :func:`~ferryman.engine.inference_step.run_inference` emits
    (text and tool-call deltas) is kept, while output shields judge the text; with
    ``hold_calls``, the step's events from its first tool call on, while the tool input
    shields judge the calls' arguments. Kept events wait for :meth:`release` (what they
    say passed, or was replaced by its judged form) or are dropped (the text was blocked:
    none of the step ever reaches the client).
    """

    def __init__(self, emit: Emit, hold: bool, hold_calls: bool = False) -> None:
        self._emit = emit
        self._hold = hold
        self._hold_calls = hold_calls
        self._events: list[EngineEvent] = []

    async def __call__(self, event: EngineEvent) -> None:
        """Keep the event, or pass it on at once when nothing is held."""
        # Once one event is held, the ones after it are too: the client reads a step's events in order.
        if self._hold or self._events or (self._hold_calls and isinstance(event, _CALL_EVENTS)):
            self._events.append(event)
        else:
            await self._emit(event)

    async def emit_now(self, event: EngineEvent) -> None:
        """Emit an event that is never held (the step's start)."""
        await self._emit(event)

    async def release(self) -> None:
        """Emit the held events, in order."""
        events, self._events = self._events, []
        for event in events:
            await self._emit(event)

    def replace_call(self, call: ToolCall) -> None:
        """Hold a call in its judged form (redacted or withheld arguments) in place of its held deltas and end."""
        events: list[EngineEvent] = []
        delta_given = False
        for event in self._events:
            if isinstance(event, ToolCallArgumentsDelta) and event.call_id == call.call_id:
                if not delta_given:
                    events.append(replace(event, delta=call.arguments_json or "{}"))
                    delta_given = True
            elif isinstance(event, ToolCallDone) and event.call.call_id == call.call_id:
                events.append(replace(event, call=call, parsed=isinstance(call.arguments, dict)))
            else:
                events.append(event)
        self._events = events

    def replace_text(self, step_id: str, text: str) -> None:
        """Hold a shield's redacted form of the step's text, in place of the held text deltas."""
        first = next((i for i, e in enumerate(self._events) if isinstance(e, TextDelta)), 0)
        others: list[EngineEvent] = [e for e in self._events if not isinstance(e, TextDelta)]
        self._events = others[:first] + ([TextDelta(step_id, text)] if text else []) + others[first:]
