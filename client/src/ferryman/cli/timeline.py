"""A turn as a step timeline: each step's type, start, duration, and what it did (tool calls and results)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rich.table import Table
from rich.text import Text

from ferryman.api.agents import (
    InferenceStep,
    MemoryRetrievalStep,
    ShieldCallStep,
    Step,
    ToolExecutionStep,
    Turn,
)
from ferryman.api.content import ToolCall, content_to_text

_PREVIEW = 160
"""Characters of a text shown in a timeline row; ``--json`` has it all."""


def step_row(step: Step, turn_started: datetime) -> dict[str, Any]:
    """One timeline row: where the step sits in the turn, how long it took, what it did.

    Args:
        step: The step.
        turn_started: When its turn started (offsets count from there).
    """
    start = step.started_at
    end = step.completed_at
    return {
        "step_id": step.step_id,
        "step_type": step.step_type,
        "offset_s": _seconds(turn_started, start),
        "duration_s": _seconds(start, end),
        "details": _details(step),
    }


def timeline(turn: Turn) -> dict[str, Any]:
    """The turn's timeline as JSON-ready data (what ``--json`` prints)."""
    return {
        "turn_id": turn.turn_id,
        "session_id": turn.session_id,
        "status": turn.status,
        "started_at": turn.started_at.isoformat(),
        "duration_s": _seconds(turn.started_at, turn.completed_at),
        "error": turn.error.model_dump() if turn.error else None,
        "steps": [step_row(step, turn.started_at) for step in turn.steps],
        "output": content_to_text(turn.output_message.content),
    }


def timeline_table(turn: Turn) -> Table:
    """The turn's timeline for people."""
    duration = _seconds(turn.started_at, turn.completed_at)
    title = f"turn {turn.turn_id} · {turn.status}" + (f" · {duration:.2f}s" if duration is not None else "")
    table = Table("#", "step", "start", "took", "what happened", title=title, title_justify="left")
    for number, step in enumerate(turn.steps, 1):
        row = step_row(step, turn.started_at)
        table.add_row(
            str(number),
            step.step_type,
            _clock(row["offset_s"]),
            _clock(row["duration_s"]),
            Text("\n".join(row["details"])),
        )
    return table


def _details(step: Step) -> list[str]:
    if isinstance(step, InferenceStep):
        return _inference(step)
    if isinstance(step, ToolExecutionStep):
        return _tool_execution(step)
    if isinstance(step, ShieldCallStep):
        return [f"violation: {step.violation.user_message}" if step.violation else "passed"]
    if isinstance(step, MemoryRetrievalStep):
        context = content_to_text(step.inserted_context)
        return [f"searched {step.vector_db_ids}: {_preview(context)}"]
    return []


def _inference(step: InferenceStep) -> list[str]:
    message = step.model_response
    lines = [f"→ {_call(call)}" for call in message.tool_calls or []]
    text = content_to_text(message.content)
    if text:
        lines.insert(0, _preview(text))
    if step.usage is not None:
        lines.append(f"tokens: {step.usage.input_tokens} in, {step.usage.output_tokens} out")
    return lines


def _tool_execution(step: ToolExecutionStep) -> list[str]:
    results = {response.call_id: response for response in step.tool_responses}
    lines: list[str] = []
    for call in step.tool_calls:
        lines.append(f"call {_call(call)}")
        response = results.get(call.call_id)
        if response is not None:
            lines.append(f"  ← {_preview(content_to_text(response.content))}")
    for request in step.approval_requests or []:
        lines.append(f"awaits approval: {request.tool_name} ({request.call_id})")
    return lines


def _call(call: ToolCall) -> str:
    arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments, ensure_ascii=False)
    return f"{call.tool_name}({_preview(arguments)})"


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start).total_seconds(), 3)


def _clock(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds:.2f}s"
