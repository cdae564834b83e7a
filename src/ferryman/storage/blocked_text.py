"""Blocked text that earlier versions stored raw, withheld in place: the data step of an upgrade.

Before SQL revision ``0009_blocked_text`` (Redis layout 3) a shield's block kept what it
blocked. An input a shield blocked stayed the turn's input, its history messages (so later
turns replayed it), its stream events, and a response's input items and its conversation's
copies of them; a tool call whose arguments a tool input shield blocked kept them in the
assistant message of the history, the steps and the events. Both backends' upgrades read a
turn's stored JSON, ask :func:`withhold` what to write instead, and write it back: the
placeholders this version stores for a block (``ferryman.withheld``), and the
refusal joined to the history after a blocked input, as this version does.

It works on the stored JSON as those versions wrote it, never by validating whole records:
what an older version stored must convert even where today's models would refuse it.
The conversion is idempotent (a Redis upgrade that died midway runs again).

A turn's input was blocked when its steps are shield steps only and the last one blocked
(input shields run before anything else, and a block ends the turn). A call's arguments
were blocked when its tool step answers it with the note of a blocked call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ferryman.withheld import WITHHELD_ARGUMENTS, WITHHELD_ARGUMENTS_JSON, WITHHELD_TEXT

_BLOCKED_CALL_NOTE = "error: this call of '"
"""How the note of a call a tool input shield blocked begins (``engine.shield_step.blocked_call``)."""
_HOSTED_CALLS = frozenset({"file_search_call", "mcp_call", "code_interpreter_call", "web_search_call"})


@dataclass(frozen=True)
class StoredTurn:
    """A turn's stored JSON, as an upgrade reads it (each list in stored order).

    Attributes:
        inputs: The turn's input messages (one JSON list).
        output: The turn's output message, if any.
        status: The turn's status.
        steps: Its steps' bodies, pending ones included.
        messages: Its history messages' bodies.
        events: Its stream events' data.
    """

    inputs: str
    output: str | None
    status: str
    steps: list[str]
    messages: list[str]
    events: list[str]


@dataclass
class Withheld:
    """What to write back for a turn: each changed value by its index in :class:`StoredTurn`'s lists.

    Attributes:
        inputs: The new input messages (None: unchanged).
        output: The new output message (None: unchanged): a paused turn's holds its calls.
        steps: New step bodies.
        messages: New history message bodies.
        appended: History messages to append (the refusal of a blocked input).
        events: New event data.
        input_blocked: Whether the turn's input was blocked: the response it ran for (if any)
            has its input items, and their copies in its conversation, withheld (:func:`withheld_item`).
    """

    inputs: str | None = None
    output: str | None = None
    steps: dict[int, str] = field(default_factory=dict)
    messages: dict[int, str] = field(default_factory=dict)
    appended: list[str] = field(default_factory=list)
    events: dict[int, str] = field(default_factory=dict)
    input_blocked: bool = False


BLOCKING_MARKS = ('"violation_level":"error"', '"blocked_by_shield"')
"""Text one of a turn's step bodies holds (as pydantic writes JSON) when anything in the turn was blocked."""


def candidate(step_body: str) -> bool:
    """Whether a step body may be of a turn with blocked text (:func:`withhold` tells for sure)."""
    return any(mark in step_body for mark in BLOCKING_MARKS)


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def input_blocked(steps: list[dict[str, Any]]) -> bool:
    """Whether a turn's steps say an input shield blocked its input (see the module's docstring)."""
    if not steps or any(step.get("step_type") != "shield_call" for step in steps):
        return False
    violation = steps[-1].get("violation") or {}
    return bool(violation.get("violation_level") == "error")


def blocked_call_ids(steps: list[dict[str, Any]]) -> set[str]:
    """The calls whose arguments a tool input shield blocked, by the notes their tool steps answer them with."""
    found: set[str] = set()
    for step in steps:
        if step.get("step_type") != "tool_execution":
            continue
        for response in step.get("tool_responses") or []:
            content = response.get("content")
            blocked = (response.get("metadata") or {}).get("blocked_by_shield")
            if blocked and isinstance(content, str) and content.startswith(_BLOCKED_CALL_NOTE):
                found.add(response["call_id"])
    return found


def withheld_message(message: dict[str, Any]) -> dict[str, Any]:
    """A stored message as this version keeps a blocked one (``ferryman.withheld.withheld_message``)."""
    role = message.get("role")
    if role == "user":
        return {"role": "user", "content": WITHHELD_TEXT, "context": None}
    if role == "tool":
        return {"role": "tool", "call_id": message.get("call_id", ""), "content": WITHHELD_TEXT}
    if role == "system":
        return {"role": "system", "content": WITHHELD_TEXT}
    calls = [_withheld_call(call) for call in message.get("tool_calls") or []]
    return {
        "role": "assistant",
        "content": WITHHELD_TEXT if message.get("content") else "",
        "stop_reason": message.get("stop_reason", "end_of_turn"),
        "tool_calls": calls,
    }


def _withheld_call(call: dict[str, Any]) -> dict[str, Any]:
    return {**call, "arguments": dict(WITHHELD_ARGUMENTS), "arguments_json": WITHHELD_ARGUMENTS_JSON}


def withheld_item(body: str) -> str:
    """A stored Responses item of a blocked input as this version keeps it (``ferryman.withheld.withheld_item``)."""
    item = json.loads(body)
    kind = item.get("type")
    if kind == "message":
        part: dict[str, Any] = {"type": "input_text", "text": WITHHELD_TEXT}
        if item.get("role") == "assistant":
            part = {"type": "output_text", "text": WITHHELD_TEXT, "annotations": [], "logprobs": []}
        item = {**item, "content": [part]}
    elif kind == "function_call":
        item = {**item, "arguments": WITHHELD_ARGUMENTS_JSON}
    elif kind == "function_call_output":
        item = {**item, "output": WITHHELD_TEXT}
    elif kind in _HOSTED_CALLS:
        content = [{"type": "input_text", "text": WITHHELD_TEXT}]
        item = {"type": "message", "id": item.get("id"), "role": "user", "content": content, "status": "completed"}
    return _dump(item)


def _withhold_calls(value: Any, call_ids: set[str]) -> Any:
    """``value`` with the arguments of every call (or approval request) of ``call_ids`` in it withheld."""
    if isinstance(value, list):
        return [_withhold_calls(entry, call_ids) for entry in value]
    if not isinstance(value, dict):
        return value
    if value.get("call_id") in call_ids and "arguments" in value and "tool_name" in value:
        withheld = {**value, "arguments": dict(WITHHELD_ARGUMENTS)}
        if "arguments_json" in value:
            withheld["arguments_json"] = WITHHELD_ARGUMENTS_JSON
        return withheld
    return {key: _withhold_calls(entry, call_ids) for key, entry in value.items()}


def _calling_steps(steps: list[dict[str, Any]], call_ids: set[str]) -> set[str]:
    """The inference steps that made any of these calls."""
    return {
        step["step_id"]
        for step in steps
        if step.get("step_type") == "inference"
        and any(call.get("call_id") in call_ids for call in (step.get("model_response") or {}).get("tool_calls") or [])
    }


def _event(data: dict[str, Any], calling: set[str], inputs: list[dict[str, Any]] | None) -> dict[str, Any]:
    """An Agents stream event with a blocked input's placeholders, and no argument text of a calling step."""
    event = data.get("event")
    payload = event.get("payload") if isinstance(event, dict) else None
    if not isinstance(event, dict) or not isinstance(payload, dict):
        return data
    if inputs is not None and isinstance(payload.get("turn"), dict):
        payload = {**payload, "turn": {**payload["turn"], "input_messages": inputs}}
    delta = payload.get("delta")
    if not isinstance(delta, dict):
        return {**data, "event": {**event, "payload": payload}}
    streamed = delta.get("type") == "tool_call" and isinstance(delta.get("tool_call"), str)
    if streamed and payload.get("step_id") in calling:
        # Argument text streams without its call's id: every call of a step that made a blocked one loses it
        # (each call's whole arguments follow in its final delta, withheld there only for the blocked ones).
        payload = {**payload, "delta": {**delta, "tool_call": ""}}
    return {**data, "event": {**event, "payload": payload}}


def withhold(turn: StoredTurn) -> Withheld:
    """What to write back for one turn so that nothing a shield blocked stays in it (nothing: already so)."""
    steps = [json.loads(body) for body in turn.steps]
    change = Withheld()
    blocked_input = input_blocked(steps)
    call_ids = blocked_call_ids(steps)
    if not blocked_input and not call_ids:
        return change
    inputs: list[dict[str, Any]] | None = None
    messages = [json.loads(body) for body in turn.messages]
    if blocked_input:
        change.input_blocked = True
        inputs = [withheld_message(message) for message in json.loads(turn.inputs)]
        if inputs != json.loads(turn.inputs):
            change.inputs = _dump(inputs)
        # The refusal, once joined to the history, stays: it is the turn's answer, not its input.
        refusal = json.loads(turn.output) if turn.output is not None else None
        answered = refusal is not None and refusal in messages
        messages = [message if message == refusal else withheld_message(message) for message in messages]
        if turn.status == "completed" and turn.output is not None and not answered:
            change.appended.append(turn.output)
    else:
        messages = _withhold_calls(messages, call_ids)
        if turn.output is not None:
            output = _withhold_calls(json.loads(turn.output), call_ids)
            if output != json.loads(turn.output):
                change.output = _dump(output)
        for index, step in enumerate(steps):
            kept = _withhold_calls(step, call_ids)
            if kept != step:
                change.steps[index] = _dump(kept)
    for index, (body, message) in enumerate(zip(turn.messages, messages, strict=True)):
        if json.loads(body) != message:
            change.messages[index] = _dump(message)
    calling = _calling_steps(steps, call_ids)
    for index, body in enumerate(turn.events):
        data = json.loads(body)
        kept = _withhold_calls(_event(data, calling, inputs), call_ids)
        if kept != data:
            change.events[index] = _dump(kept)
    return change
