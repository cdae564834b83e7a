"""The ReAct loop of one task without I/O, shared by :class:`ReActAgent` and :class:`AsyncReActAgent`.

The model answers every turn with one JSON object (:class:`ReActStep`): a
thought, then either an action (a client tool and its arguments) or the final
answer. :class:`ReActLoop` says which message each turn of the server gets,
reads the model's output when a turn completes, names the tool call to run
and takes its result as the next turn's observation. For the caller the whole
loop is one turn: its events carry the first server turn's id, only the first
``TurnStarted`` passes, each action is a client ``tool_execution`` step, and
one ``TurnCompleted`` (the answer as ``output_text``) ends it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from ferryman.api.agents import ToolExecutionStep, Turn
from ferryman.api.content import ToolCall, ToolResponse, content_to_text
from ferryman.api.responses import Response

from ._agent_setup import MessagesInput
from .events import (
    AgentEvent,
    StepCompleted,
    StepMetadata,
    StepProgress,
    StepStarted,
    ToolCallIssued,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
    Usage,
)
from .tools import ClientTool, error_response

DEFAULT_MAX_ITERATIONS = 10
INSTRUCTIONS = """You solve the user's task step by step, alternating Thought, Action and Observation.
Answer every message with one JSON object and nothing else:
{{"thought": "...", "action": {{"tool_name": "...", "arguments": {{...}}}}, "answer": null}}
to use a tool (its result comes back as the next message, starting with "Observation:"), or
{{"thought": "...", "action": null, "answer": "..."}}
once you know the final answer.
The tools:
{tools}"""


class ReActAction(BaseModel):
    """A tool the model wants to run."""

    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ReActStep(BaseModel):
    """One answer of the model: a thought, and an action or the final answer."""

    thought: str
    action: ReActAction | None = None
    answer: str | None = None


class ReActIteration(BaseModel):
    """One round of the loop: what the model said, and what its action returned."""

    step: ReActStep | None
    """None when the model's output did not fit the format."""
    observation: str | None = None


class ReActResult(BaseModel):
    """The outcome of ``ReActAgent.run``."""

    answer: str | None
    """None when ``max_iterations`` was reached first."""
    iterations: list[ReActIteration]
    session_id: str


RESPONSE_FORMAT = {"type": "json_schema", "json_schema": ReActStep.model_json_schema(), "name": "react_step"}
"""The ``response_format`` that holds the model to :class:`ReActStep`."""


class ReActTools:
    """The client tools a ReAct agent acts with: described in its instructions, run by the loop.

    Args:
        tools: ``@client_tool`` functions or plain typed functions.
        max_iterations: The most turns of the server one task takes.

    Raises:
        ValueError: A tool is not a client tool, or ``max_iterations`` is under 1.
    """

    def __init__(self, tools: Sequence[ClientTool | Callable[..., Any]], max_iterations: int) -> None:
        if max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        if any(isinstance(tool, str | Mapping) or not callable(tool) for tool in tools):
            raise ValueError("a ReAct agent acts with client tools only (functions or @client_tool)")
        made = (tool if isinstance(tool, ClientTool) else ClientTool(tool) for tool in tools)
        self.tools = {tool.name: tool for tool in made}
        self.max_iterations = max_iterations

    def instructions(self, given: str | None) -> str:
        """The agent's instructions: ``given``, else ReAct's format and the tools' descriptions.

        Raises:
            TypeError: ``given`` is not text (tools passed where the instructions go).
        """
        if given is None:
            return default_instructions(list(self.tools.values()))
        if not isinstance(given, str):
            raise TypeError("instructions must be text; pass the tools by name: tools=[...]")
        return given

    def loop(self, task: MessagesInput) -> ReActLoop:
        """The loop of one task."""
        return ReActLoop(self, task)


class ReActLoop:
    """One task: the message of each server turn, what the model's output means, the events the caller sees.

    The shell runs ``while (message := loop.next_message()) is not None``: a
    turn with ``message``, each of its events through :meth:`on_event`, then
    the :attr:`action` (if any) with :meth:`tool_for`, its result through
    :meth:`observe`; and at last the events of :meth:`finish`.
    """

    def __init__(self, tools: ReActTools, task: MessagesInput) -> None:
        """Start the loop of ``task`` with ``tools``."""
        self._tools = tools
        self._message: MessagesInput | None = task
        self.iterations: list[ReActIteration] = []
        self.answer: str | None = None
        self.action: ToolCall | None = None
        """The tool call to run before the next turn, if the model asked for one."""
        self._turn_id: str | None = None
        self._server_turn = ""
        self._step_id = ""
        self._last: TurnCompleted | None = None
        self._failed = False
        self._steps = 0
        self._usage = Usage()
        self._started_at = datetime.now(UTC)

    def next_message(self) -> MessagesInput | None:
        """The message of the next server turn; None once the model answered, a turn failed or all turns ran."""
        if self.answer is not None or self._failed or len(self.iterations) >= self._tools.max_iterations:
            return None
        return self._message

    def on_event(self, event: AgentEvent) -> list[AgentEvent]:
        """The events of the caller's turn that one event of a server turn becomes."""
        if isinstance(event, TurnStarted):
            self._server_turn = event.turn_id
            if self._turn_id is not None:
                return []
            self._turn_id = event.turn_id
            return [event]
        if isinstance(event, TurnCompleted):
            return self._completed(event)
        if isinstance(event, TurnFailed):
            self._failed, self.action = True, None
        return [event.model_copy(update={"turn_id": self.turn_id or event.turn_id})]

    def tool_for(self, call: ToolCall) -> ClientTool | None:
        """The tool an action names."""
        return self._tools.tools.get(call.tool_name)

    def unknown_tool(self, call: ToolCall) -> ToolResponse:
        """What the model is told when it names a tool there is none of."""
        return error_response(call, f"no tool named {call.tool_name!r}; the tools are {sorted(self._tools.tools)}")

    def observe(self, response: ToolResponse) -> list[AgentEvent]:
        """Take the result of :attr:`action` as the next turn's observation; the client step completes."""
        call, self.action = self.action, None
        assert call is not None, "no action to observe"
        observation = content_to_text(response.content)
        self.iterations[-1].observation = observation
        self._message = f"Observation: {observation}"
        step = ToolExecutionStep(
            turn_id=self.turn_id,
            step_id=self._step_id,
            started_at=self._started_at,
            completed_at=datetime.now(UTC),
            tool_calls=[call],
            tool_responses=[response],
        )
        self._steps += 1
        return [StepCompleted(turn_id=self.turn_id, step_id=step.step_id, step_type="tool_execution", step=step)]

    def finish(self) -> list[AgentEvent]:
        """The end of the caller's turn: the answer (empty when ``max_iterations`` came first) and the last result.

        Nothing when a turn of the server failed: its ``TurnFailed`` ended the caller's turn.
        """
        if self._failed:
            return []
        assert self._last is not None, "no turn of the server completed"
        completed = TurnCompleted(
            turn_id=self.turn_id,
            output_text=self.answer or "",
            step_count=self._steps,
            usage=self._usage,
            result=self._last.result,
        )
        return [completed]

    def result(self, session_id: str) -> ReActResult:
        """The answer and every iteration, once the loop ended."""
        return ReActResult(answer=self.answer, iterations=self.iterations, session_id=session_id)

    @property
    def last_result(self) -> Turn | Response:
        """The final object of the last server turn."""
        assert self._last is not None, "no turn of the server completed"
        return self._last.result

    @property
    def turn_id(self) -> str:
        """The caller's turn: the id of the first server turn."""
        return self._turn_id or ""

    def _completed(self, event: TurnCompleted) -> list[AgentEvent]:
        self._last, self._server_turn = event, event.turn_id
        self._turn_id = self._turn_id or event.turn_id  # a turn that was not streamed started no event
        self._steps += event.step_count
        self._usage = Usage(
            input_tokens=self._usage.input_tokens + event.usage.input_tokens,
            output_tokens=self._usage.output_tokens + event.usage.output_tokens,
        )
        try:
            step = ReActStep.model_validate_json(event.output_text)
        except ValidationError as exc:
            observation = f"Your output does not fit the JSON format: {exc.errors(include_url=False)}"
            self.iterations.append(ReActIteration(step=None, observation=observation))
            self._message = f"Observation: {observation}"
            return []
        self.iterations.append(ReActIteration(step=step))
        if step.answer is not None or step.action is None:
            self.answer = step.answer or ""
            return []
        action, index = step.action, len(self.iterations) - 1
        self.action = ToolCall(call_id=f"react_{index}", tool_name=action.tool_name, arguments=action.arguments)
        self._started_at = datetime.now(UTC)
        step_id = self._step_id = f"{self._server_turn}_react"
        started = StepStarted(
            turn_id=self.turn_id, step_id=step_id, step_type="tool_execution", metadata=StepMetadata(server_side=False)
        )
        delta = ToolCallIssued(tool_call=self.action)
        issued = StepProgress(turn_id=self.turn_id, step_id=step_id, step_type="tool_execution", delta=delta)
        return [started, issued]


def default_instructions(tools: Sequence[ClientTool]) -> str:
    """ReAct's instructions, describing ``tools``."""
    described = "\n".join(f"- {t.name}: {t.description} Arguments: {json.dumps(t.input_schema)}" for t in tools)
    return INSTRUCTIONS.format(tools=described or "(none)")
