"""``EventLogger``: a turn printed as it streams, with ``rich`` (steps, tool calls and results, timings, tokens).

``rich`` is imported when a logger is made, so that the client imports
without it. ``ferryman chat`` prints its turns with this logger.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ferryman.api.agents import InferenceStep, ShieldCallStep, ToolExecutionStep
from ferryman.api.content import ToolCall, content_to_text

from .events import (
    AgentEvent,
    StepCompleted,
    StepProgress,
    StepStarted,
    TextDelta,
    ToolCallIssued,
    TurnAwaitingInput,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)

if TYPE_CHECKING:
    from rich.console import Console

RESULT_PREVIEW = 300
"""The most characters of a tool result printed."""


class EventLogger:
    """Prints the events of agent turns as they arrive.

    Args:
        console: The ``rich`` console to print on; a new one (stdout) by default.
        show_arguments: Print each tool call's arguments.
    """

    def __init__(self, console: Console | None = None, show_arguments: bool = True) -> None:
        from rich.console import Console

        self.console = console or Console()
        self.show_arguments = show_arguments
        self._started: dict[str, float] = {}
        self._in_text = False

    def log(self, events: Iterable[AgentEvent]) -> Iterator[AgentEvent]:
        """Print each event, then pass it on: ``for event in logger.log(agent.create_turn(...))``."""
        for event in events:
            self.handle(event)
            yield event

    async def alog(self, events: AsyncIterable[AgentEvent]) -> AsyncIterator[AgentEvent]:
        """:meth:`log` of an async stream of events."""
        async for event in events:
            self.handle(event)
            yield event

    def print_turn(self, events: Iterable[AgentEvent]) -> AgentEvent | None:
        """Print a whole turn; return its last event (``TurnCompleted`` or ``TurnFailed``), None if there was none."""
        last = None
        for event in self.log(events):
            last = event
        return last

    def handle(self, event: AgentEvent) -> None:
        """Print one event."""
        if isinstance(event, TurnStarted):
            self._started[event.turn_id] = time.monotonic()
            self._line(f"[bold]turn[/] [dim]{event.turn_id}[/]")
        elif isinstance(event, StepStarted):
            self._started[event.step_id] = time.monotonic()
            side = "" if event.metadata.server_side else " [magenta](client)[/]"
            self._line(f"[blue]▸ {event.step_type}[/]{side}")
        elif isinstance(event, StepProgress):
            self._progress(event)
        elif isinstance(event, StepCompleted):
            self._step_completed(event)
        elif isinstance(event, TurnAwaitingInput):
            waits = f"{len(event.tool_calls)} client tool call(s), {len(event.approval_requests)} approval(s)"
            self._line(f"[yellow]⏸ awaiting input: {waits}[/]")
            for request in event.approval_requests:
                self._line(f"  [yellow]approval?[/] {_escape(_call_text(request.tool_name, request.arguments))}")
        elif isinstance(event, TurnCompleted):
            seconds = self._elapsed(event.turn_id)
            usage = event.usage
            self._line(
                f"[green]✓ turn completed[/] in {seconds:.2f}s: {event.step_count} steps, "
                f"{usage.input_tokens} input + {usage.output_tokens} output tokens"
            )
        elif isinstance(event, TurnFailed):
            self._line(f"[red]✗ turn failed[/] {_escape(event.code)}: {_escape(event.message)}")

    def _progress(self, event: StepProgress) -> None:
        delta = event.delta
        if isinstance(delta, TextDelta):
            self.console.print(delta.text, end="", markup=False, highlight=False, soft_wrap=True)
            self._in_text = True
        elif isinstance(delta, ToolCallIssued):
            self._tool_call(delta.tool_call)

    def _tool_call(self, call: ToolCall) -> None:
        text = _call_text(call.tool_name, call.arguments) if self.show_arguments else call.tool_name
        self._line(f"  [cyan]→ {_escape(text)}[/]")

    def _step_completed(self, event: StepCompleted) -> None:
        step, seconds = event.step, self._elapsed(event.step_id)
        if isinstance(step, InferenceStep):
            tokens = f", {step.usage.input_tokens}→{step.usage.output_tokens} tokens" if step.usage else ""
            self._line(f"[dim]  inference {seconds:.2f}s{tokens}[/]")
        elif isinstance(step, ToolExecutionStep):
            for response in step.tool_responses:
                result = content_to_text(response.content)
                if len(result) > RESULT_PREVIEW:
                    result = result[:RESULT_PREVIEW] + "…"
                failed = bool((response.metadata or {}).get("error"))
                colour = "red" if failed else "green"
                self._line(f"  [{colour}]← {_escape(response.tool_name)}:[/] {_escape(result)}")
            self._line(f"[dim]  tools {seconds:.2f}s[/]")
        elif isinstance(step, ShieldCallStep):
            verdict = step.violation.user_message if step.violation else "passed"
            self._line(f"[dim]  shield {seconds:.2f}s: {_escape(verdict or 'violation')}[/]")

    def _line(self, markup: str) -> None:
        if self._in_text:  # end the model's streamed text before the next line
            self.console.print()
            self._in_text = False
        self.console.print(markup, highlight=False)

    def _elapsed(self, key: str) -> float:
        started = self._started.pop(key, None)
        return 0.0 if started is None else time.monotonic() - started


def _call_text(name: str, arguments: Any) -> str:
    return (
        f"{name}({arguments if isinstance(arguments, str) else ', '.join(f'{k}={v!r}' for k, v in arguments.items())})"
    )


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
