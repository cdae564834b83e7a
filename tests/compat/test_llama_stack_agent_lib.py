"""The high-level ``llama_stack_client.lib.agents`` helpers (Agent, client_tool, EventLogger) against ferryman.

Note: ``Agent.create_turn`` falls back to ``self.session_id[-1]`` (the last
*character* of the session id) when no ``session_id`` is given, a bug of the
client library; every test passes ``session_id`` explicitly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from compat_support import MODEL_ID
from llama_stack_client import LlamaStackClient
from llama_stack_client.lib.agents.agent import Agent
from llama_stack_client.lib.agents.client_tool import ClientTool, client_tool
from llama_stack_client.lib.agents.event_logger import EventLogger
from llama_stack_client.types.agents import AgentTurnResponseStreamChunk, Turn

from ferryman.testing import ScriptedReply, ScriptedToolCall
from inprocess import Served

QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


@dataclass
class WeatherTool:
    """A ``@client_tool`` function and the arguments of each of its runs."""

    runs: list[dict[str, Any]] = field(default_factory=list)

    def build(self) -> ClientTool:
        """The client tool, recording its calls in ``runs``."""

        def get_weather(city: str) -> dict[str, str]:
            """Current weather of a city

            :param city: City name
            """
            self.runs.append({"city": city})
            return {"city": city, "forecast": "sunny"}

        return client_tool(get_weather)


@dataclass
class AgentChat:
    """An ``Agent`` and the session it talks in."""

    agent: Agent
    session_id: str

    def stream(self) -> Iterator[AgentTurnResponseStreamChunk]:
        """A streamed turn asking ``QUESTION``."""
        return self.agent.create_turn(messages=QUESTION, session_id=self.session_id, stream=True)

    def turn(self) -> Turn:
        """A non-streamed turn asking ``QUESTION``."""
        return self.agent.create_turn(messages=QUESTION, session_id=self.session_id, stream=False)


def open_agent(client: LlamaStackClient, tools: list[Any]) -> AgentChat:
    """Build an ``Agent`` (which creates it on the server) and open a session."""
    agent = Agent(client, model=MODEL_ID, instructions="You are a test agent.", tools=tools)
    return AgentChat(agent, agent.create_session("compat"))


@pytest.fixture()
def weather_tool() -> WeatherTool:
    """A fresh recording weather tool."""
    return WeatherTool()


@pytest.fixture()
def weather_agent(client: LlamaStackClient, weather_tool: WeatherTool) -> AgentChat:
    """An agent with the ``get_weather`` client tool."""
    return open_agent(client, [weather_tool.build()])


@pytest.fixture()
def math_agent(client: LlamaStackClient) -> AgentChat:
    """An agent with the server-side ``builtin::math`` toolgroup."""
    return open_agent(client, ["builtin::math"])


def script_weather_round_trip(model: Served) -> None:
    """The model calls ``get_weather`` for Paris, then answers."""
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    model.enqueue_text("It is sunny in Paris.")


def event_types(chunks: list[AgentTurnResponseStreamChunk]) -> list[str]:
    """The ``event_type`` of each chunk's payload."""
    return [chunk.event.payload.event_type for chunk in chunks]


# ---- client tools ------------------------------------------------------------


def test_agent_runs_the_client_tool_with_the_model_arguments(
    weather_agent: AgentChat, weather_tool: WeatherTool, model: Served
) -> None:
    """The streamed turn pauses, the Agent runs the tool locally with the model's arguments, exactly once."""
    script_weather_round_trip(model)
    list(weather_agent.stream())
    assert weather_tool.runs == [{"city": "Paris"}]


def test_agent_resumes_the_same_turn_to_the_answer(weather_agent: AgentChat, model: Served) -> None:
    """The Agent's stream goes through turn_awaiting_input to turn_complete of the same turn, with the answer."""
    script_weather_round_trip(model)
    chunks = list(weather_agent.stream())
    types = event_types(chunks)
    assert types.count("turn_awaiting_input") == 1
    assert types[-1] == "turn_complete"
    paused = chunks[types.index("turn_awaiting_input")].event.payload.turn
    final = chunks[-1].event.payload.turn
    assert final.turn_id == paused.turn_id
    assert final.output_message.content == "It is sunny in Paris."
    assert [s.step_type for s in final.steps] == ["inference", "tool_execution", "inference"]


def test_agent_sends_the_tool_result_to_the_model(weather_agent: AgentChat, model: Served) -> None:
    """The model's second request ends with the tool message carrying the tool's JSON result."""
    script_weather_round_trip(model)
    list(weather_agent.stream())
    _, second = model.requests()
    call_id = second["messages"][-2]["tool_calls"][0]["id"]
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["tool_call_id"] == call_id
    assert json.loads(tool_message["content"]) == {"city": "Paris", "forecast": "sunny"}


def test_agent_offers_the_client_tool_to_the_model(weather_agent: AgentChat, model: Served) -> None:
    """The tool definition made by ``@client_tool`` reaches the model as an OpenAI function schema."""
    model.enqueue_text("Hello.")
    list(weather_agent.stream())
    (tool,) = model.requests()[0]["tools"]
    assert tool["function"]["name"] == "get_weather"
    assert tool["function"]["description"] == "Current weather of a city"
    assert tool["function"]["parameters"]["properties"]["city"]["type"] == "string"
    assert tool["function"]["parameters"]["required"] == ["city"]


def test_agent_non_streamed_turn_returns_the_final_turn(
    weather_agent: AgentChat, weather_tool: WeatherTool, model: Served
) -> None:
    """``create_turn(stream=False)`` runs the client tool and returns the completed turn."""
    script_weather_round_trip(model)
    turn = weather_agent.turn()
    assert isinstance(turn, Turn)
    assert turn.output_message.content == "It is sunny in Paris."
    assert weather_tool.runs == [{"city": "Paris"}]
    tool_step = turn.steps[1]
    assert tool_step.step_type == "tool_execution"
    assert json.loads(tool_step.tool_responses[0].content) == {"city": "Paris", "forecast": "sunny"}


# ---- server-side tools ---------------------------------------------------------


def test_agent_with_builtin_math_lists_its_tools(math_agent: AgentChat) -> None:
    """``Agent.initialize`` lists ``builtin::math`` with ``tools.list`` and learns its ``calculator``."""
    assert math_agent.agent.builtin_tools == {"calculator": {}}


def test_agent_with_builtin_math_runs_the_calculator_on_the_server(math_agent: AgentChat, model: Served) -> None:
    """A calculator call runs on the server in the same turn: no pause, the result goes to the model."""
    model.enqueue_tool_call("calculator", {"expression": "6 * 7"})
    model.enqueue_text("The answer is 42.")
    chunks = list(math_agent.stream())
    assert "turn_awaiting_input" not in event_types(chunks)
    turn = chunks[-1].event.payload.turn
    assert turn.output_message.content == "The answer is 42."
    assert [s.step_type for s in turn.steps] == ["inference", "tool_execution", "inference"]
    assert turn.steps[1].tool_responses[0].content == "42"
    assert model.requests()[1]["messages"][-1]["content"] == "42"


def test_agent_with_a_single_builtin_tool_initializes(client: LlamaStackClient) -> None:
    """``tools=["builtin::math/calculator"]`` (one tool of a group, as the Agent docs allow) builds an Agent.

    ``Agent.initialize`` calls ``tools.list(toolgroup_id="builtin::math/calculator")``;
    Llama Stack answers with the tools of the group ``builtin::math``.
    """
    chat = open_agent(client, ["builtin::math/calculator"])
    assert chat.agent.builtin_tools == {"calculator": {}}


def test_agent_runs_two_client_tool_calls_and_resumes_once(
    weather_agent: AgentChat, weather_tool: WeatherTool, model: Served
) -> None:
    """Two calls in one model message: the Agent runs both locally and answers both in one resume."""
    calls = [ScriptedToolCall(name="get_weather", arguments={"city": city}) for city in ("Paris", "Rome")]
    model.enqueue(ScriptedReply(tool_calls=calls), ScriptedReply(text="Sunny in both."))
    turn = weather_agent.turn()
    assert weather_tool.runs == [{"city": "Paris"}, {"city": "Rome"}]
    assert turn.output_message.content == "Sunny in both."
    assert len(turn.steps[1].tool_responses) == 2


# ---- EventLogger -----------------------------------------------------------------


def test_event_logger_prints_a_streamed_text_turn(
    weather_agent: AgentChat, model: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    """``for log in EventLogger().log(stream): log.print()`` prints the inference text."""
    model.enqueue_text("It is sunny in Paris.")
    for log in EventLogger().log(weather_agent.stream()):
        log.print()
    out = capsys.readouterr().out
    assert "inference> " in out
    assert "It is sunny in Paris." in out


def test_event_logger_prints_tool_calls_and_responses(
    math_agent: AgentChat, model: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tool_execution step is printed with the tool's arguments and its response."""
    model.enqueue_tool_call("calculator", {"expression": "6 * 7"})
    model.enqueue_text("The answer is 42.")
    for log in EventLogger().log(math_agent.stream()):
        log.print()
    out = capsys.readouterr().out
    assert "tool_execution> Tool:calculator Args:{'expression': '6 * 7'}" in out
    assert "tool_execution> Tool:calculator Response:42" in out
    assert "The answer is 42." in out


def test_event_logger_prints_a_client_tool_round_trip(
    weather_agent: AgentChat, model: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    """Across the pause and the resume, the logger prints the client tool step and the final answer."""
    script_weather_round_trip(model)
    for log in EventLogger().log(weather_agent.stream()):
        log.print()
    out = capsys.readouterr().out
    assert "tool_execution> Tool:get_weather Args:{'city': 'Paris'}" in out
    assert "It is sunny in Paris." in out


# ---- upstream failures -------------------------------------------------------------


def test_agent_stream_ends_with_the_error_chunk(weather_agent: AgentChat, model: Served) -> None:
    """An upstream failure reaches the Agent's stream as a last chunk with ``error``."""
    model.enqueue_error(400, "model exploded")
    chunks = list(weather_agent.stream())
    assert hasattr(chunks[-1], "error")
    assert "model exploded" in chunks[-1].error["message"]


def test_agent_non_streamed_turn_raises_on_upstream_failure(weather_agent: AgentChat, model: Served) -> None:
    """``create_turn(stream=False)`` turns the error chunk into ``RuntimeError`` with the server's message."""
    model.enqueue_error(400, "model exploded")
    with pytest.raises(RuntimeError, match="Turn did not complete. Error: .*model exploded"):
        weather_agent.turn()


def test_event_logger_prints_the_error(
    weather_agent: AgentChat, model: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    """The EventLogger prints the error chunk's message."""
    model.enqueue_error(400, "model exploded")
    for log in EventLogger().log(weather_agent.stream()):
        log.print()
    assert "model exploded" in capsys.readouterr().out
