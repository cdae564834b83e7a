"""``ReActAgent``: reason, act, observe, as turns of one :class:`~ferryman.client.Agent` session.

The model answers every turn with one JSON object (:class:`ReActStep`, asked
for through the agent's ``response_format``): a thought, then either an
action (a client tool and its arguments) or the final answer. The agent runs
the action's tool here and sends what it returned as the next turn's
message, until the model answers or ``max_iterations`` is reached. Output
that does not fit the format is sent back as the observation, so the model
can correct itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from ferryman.api.agents import Turn
from ferryman.api.content import ToolCall, content_to_text
from ferryman.api.responses import MessageItem, OutputText, Response

from ._agent_setup import Api
from ._client import Client
from .agent import Agent
from .events import AgentEvent
from .tools import ClientTool

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
    """The outcome of :meth:`ReActAgent.run`."""

    answer: str | None
    """None when ``max_iterations`` was reached first."""
    iterations: list[ReActIteration]
    session_id: str


class ReActAgent:
    """A ReAct loop over an :class:`~ferryman.client.Agent` whose tools are client tools.

    Args:
        client: The client of the server.
        model: The model's id.
        tools: The client tools the model may act with (``@client_tool`` or plain typed functions).
        instructions: The system instructions; by default ReAct's format and the tools' descriptions.
        api: The API the agent's turns run on (see :class:`~ferryman.client.Agent`).
        max_iterations: The most turns one :meth:`run` takes.
        **agent_config: More fields of the agent's configuration.
    """

    def __init__(
        self,
        client: Client,
        model: str,
        tools: Sequence[ClientTool | Callable[..., Any]] = (),
        instructions: str | None = None,
        *,
        api: Api = "agents",
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        **agent_config: Any,
    ) -> None:
        self.tools = {t.name: t for t in (t if isinstance(t, ClientTool) else ClientTool(t) for t in tools)}
        self.max_iterations = max_iterations
        schema = {"type": "json_schema", "json_schema": ReActStep.model_json_schema(), "name": "react_step"}
        # The tools are described in the instructions, not offered as tools: the model acts through its JSON.
        self.agent = Agent(
            client,
            model,
            instructions if instructions is not None else default_instructions(list(self.tools.values())),
            api=api,
            response_format=schema,
            **agent_config,
        )

    def run(
        self, task: str, session_id: str | None = None, on_event: Callable[[AgentEvent], None] | None = None
    ) -> ReActResult:
        """Loop until the model answers the task.

        Args:
            task: The user's task.
            session_id: The session to run in; a new one by default.
            on_event: Called with each event of every turn (the turns stream when it is given).
        """
        session = session_id or self.agent.create_session("react")
        iterations: list[ReActIteration] = []
        message = task
        for _ in range(self.max_iterations):
            output = self._turn(message, session, on_event)
            try:
                step = ReActStep.model_validate_json(output)
            except ValidationError as exc:
                observation = f"Your output does not fit the JSON format: {exc.errors(include_url=False)}"
                iterations.append(ReActIteration(step=None, observation=observation))
                message = f"Observation: {observation}"
                continue
            if step.answer is not None or step.action is None:
                iterations.append(ReActIteration(step=step))
                return ReActResult(answer=step.answer or "", iterations=iterations, session_id=session)
            observation = self._act(step.action, len(iterations))
            iterations.append(ReActIteration(step=step, observation=observation))
            message = f"Observation: {observation}"
        return ReActResult(answer=None, iterations=iterations, session_id=session)

    def _turn(self, message: str, session_id: str, on_event: Callable[[AgentEvent], None] | None) -> str:
        if on_event is None:
            return output_text(self.agent.create_turn(message, session_id, stream=False))
        result: Turn | Response | None = None
        for event in self.agent.create_turn(message, session_id, stream=True):
            on_event(event)
            if event.type == "turn_completed":
                result = event.result
        return output_text(result) if result is not None else ""

    def _act(self, action: ReActAction, index: int) -> str:
        tool = self.tools.get(action.tool_name)
        if tool is None:
            return f"error: no tool named {action.tool_name!r}; the tools are {sorted(self.tools)}"
        call = ToolCall(call_id=f"react_{index}", tool_name=action.tool_name, arguments=action.arguments)
        return content_to_text(tool.run(call).content)


def default_instructions(tools: Sequence[ClientTool]) -> str:
    """ReAct's instructions, describing ``tools``."""
    described = "\n".join(f"- {t.name}: {t.description} Arguments: {json.dumps(t.input_schema)}" for t in tools)
    return INSTRUCTIONS.format(tools=described or "(none)")


def output_text(result: Turn | Response | Mapping[str, Any]) -> str:
    """The model's final text in a turn or response."""
    if isinstance(result, Turn):
        return content_to_text(result.output_message.content)
    response = result if isinstance(result, Response) else Response.model_validate(result)
    texts = []
    for item in response.output:
        if isinstance(item, MessageItem):
            parts = [item.content] if isinstance(item.content, str) else item.content
            texts += [p if isinstance(p, str) else p.text for p in parts if isinstance(p, str | OutputText)]
    return "".join(texts)
