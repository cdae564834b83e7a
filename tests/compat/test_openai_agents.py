"""The OpenAI Agents SDK (``openai-agents``) running an agent with a function tool on ferryman's Responses API.

The scripted model first calls ``get_weather``; the SDK runs the tool locally
and sends its result back in a second response, then the scripted model
answers. The SDK can continue in three ways, each tested: by re-sending the
whole input (its default), by ``previous_response_id``
(``auto_previous_response_id=True``), or in a conversation (``conversation_id``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
import pytest
from agents import (
    Agent,
    FunctionTool,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
    set_default_openai_api,
    set_default_openai_client,
    set_tracing_disabled,
)

from ferryman.testing import ScriptedReply, ScriptedToolCall
from inprocess import BASE_URL, Served

MODEL = "scripted-model"
QUESTION = "What is the weather in Paris?"
ANSWER = "It is sunny in Paris, 21C."
INSTRUCTIONS = "You answer weather questions with the get_weather tool."


@dataclass
class WeatherTool:
    """A ``@function_tool`` that records the arguments of each run."""

    runs: list[dict[str, Any]] = field(default_factory=list)

    def build(self) -> FunctionTool:
        """The tool, recording into ``runs``."""

        @function_tool
        def get_weather(city: str) -> str:
            """Current weather of a city.

            Args:
                city: City name.
            """
            self.runs.append({"city": city})
            return f"sunny, 21C in {city}"

        return get_weather


@pytest.fixture(autouse=True)
def no_tracing() -> None:
    """The SDK would otherwise try to export traces to OpenAI."""
    set_tracing_disabled(True)


@pytest.fixture()
def sync_client(model: Served) -> Iterator[openai.OpenAI]:
    """A plain SDK client on ferryman, to inspect what the agent left there."""
    http = model.sdk_http_client()
    with openai.OpenAI(
        base_url=f"{BASE_URL}/v1", http_client=http, api_key="unused", max_retries=0, timeout=30
    ) as client:
        yield client


def script_weather_turn(model: Served) -> None:
    """The model calls the tool, then answers."""
    call = ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}, call_id="call_weather")
    model.enqueue(ScriptedReply(tool_calls=[call]))
    model.enqueue_text(ANSWER)


def async_client(served: Served) -> openai.AsyncOpenAI:
    """The client the agent's model uses, over ASGI to the app (so it runs on the app's event loop: ``served.call``)."""
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=served.http.app), base_url=BASE_URL)
    return openai.AsyncOpenAI(base_url=f"{BASE_URL}/v1", http_client=http, api_key="unused", max_retries=0, timeout=30)


def run_agent(served: Served, tool: WeatherTool, **run_kwargs: Any) -> Any:
    """Run the weather agent on ferryman; ``conversation=True`` creates a conversation for it first."""
    make_conversation = run_kwargs.pop("conversation", False)

    async def main() -> tuple[Any, str | None]:
        async with async_client(served) as client:
            agent = Agent(
                name="weather",
                instructions=INSTRUCTIONS,
                tools=[tool.build()],
                model=OpenAIResponsesModel(MODEL, client),
            )
            conversation_id = None
            if make_conversation:
                conversation_id = (await client.conversations.create()).id
                run_kwargs["conversation_id"] = conversation_id
            return await Runner.run(agent, QUESTION, **run_kwargs), conversation_id

    return served.call(main)


def assert_model_saw_the_tool_round_trip(model: Served) -> None:
    """Two model requests; the second holds system, user, the call and its result, in order."""
    first, second = model.requests()
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    assert [(m["role"], m.get("content")) for m in first["messages"]] == [
        ("system", INSTRUCTIONS),
        ("user", QUESTION),
    ]
    messages = second["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[1]["content"] == QUESTION
    (call,) = messages[2]["tool_calls"]
    assert call["id"] == "call_weather" and call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert messages[3] == {"role": "tool", "tool_call_id": "call_weather", "content": "sunny, 21C in Paris"}


def test_agent_runs_its_tool_resending_the_whole_input(model: Served, sync_client: openai.OpenAI) -> None:
    """The SDK's default: every model call sends the full input, with no ``previous_response_id``."""
    script_weather_turn(model)
    tool = WeatherTool()
    result, _ = run_agent(model, tool)

    assert tool.runs == [{"city": "Paris"}]
    assert result.final_output == ANSWER
    assert_model_saw_the_tool_round_trip(model)

    first_id, second_id = (r.response_id for r in result.raw_responses)
    assert first_id.startswith("resp_") and second_id.startswith("resp_")
    second = sync_client.responses.retrieve(second_id)
    assert second.previous_response_id is None
    assert second.status == "completed" and second.output_text == ANSWER
    items = list(sync_client.responses.input_items.list(second_id, order="asc"))
    assert [i.type for i in items] == ["message", "function_call", "function_call_output"]
    assert items[1].call_id == items[2].call_id == "call_weather"


def test_agent_chains_by_previous_response_id(model: Served, sync_client: openai.OpenAI) -> None:
    """With ``auto_previous_response_id`` the SDK sends only the tool result and chains on the first response."""
    script_weather_turn(model)
    tool = WeatherTool()
    result, _ = run_agent(model, tool, auto_previous_response_id=True)

    assert tool.runs == [{"city": "Paris"}]
    assert result.final_output == ANSWER
    assert_model_saw_the_tool_round_trip(model)

    first_id, second_id = (r.response_id for r in result.raw_responses)
    assert sync_client.responses.retrieve(second_id).previous_response_id == first_id
    (given,) = sync_client.responses.input_items.list(second_id).data
    assert given.type == "function_call_output" and given.call_id == "call_weather"
    assert result.last_response_id == second_id


def test_agent_in_a_conversation(model: Served, sync_client: openai.OpenAI) -> None:
    """With ``conversation_id`` ferryman keeps the history; the conversation ends up with the whole exchange."""
    script_weather_turn(model)
    tool = WeatherTool()
    result, conversation_id = run_agent(model, tool, conversation=True)

    assert tool.runs == [{"city": "Paris"}]
    assert result.final_output == ANSWER
    assert_model_saw_the_tool_round_trip(model)

    items = list(sync_client.conversations.items.list(conversation_id, order="asc"))
    assert [i.type for i in items] == ["message", "function_call", "function_call_output", "message"]
    assert [getattr(i, "role", None) for i in items] == ["user", None, None, "assistant"]
    assert items[1].name == "get_weather" and json.loads(items[1].arguments) == {"city": "Paris"}
    assert items[2].output == "sunny, 21C in Paris"


def test_agent_streamed(model: Served) -> None:
    """``Runner.run_streamed`` over ferryman's SSE: the tool call, its output and the answer come as run items."""
    script_weather_turn(model)
    tool = WeatherTool()

    async def main() -> tuple[Any, list[str]]:
        async with async_client(model) as client:
            agent = Agent(
                name="weather",
                instructions=INSTRUCTIONS,
                tools=[tool.build()],
                model=OpenAIResponsesModel(MODEL, client),
            )
            result = Runner.run_streamed(agent, QUESTION)
            names = [event.name async for event in result.stream_events() if event.type == "run_item_stream_event"]
            return result, names

    result, names = model.call(main)
    assert tool.runs == [{"city": "Paris"}]
    assert result.final_output == ANSWER
    assert names == ["tool_called", "tool_output", "message_output_created"]
    assert_model_saw_the_tool_round_trip(model)


def test_agent_with_the_default_client(model: Served) -> None:
    """``set_default_openai_client`` + the Responses API by default, the model named by string."""
    script_weather_turn(model)
    tool = WeatherTool()

    async def main() -> Any:
        async with async_client(model) as client:
            set_default_openai_client(client, use_for_tracing=False)
            set_default_openai_api("responses")
            agent = Agent(name="weather", instructions=INSTRUCTIONS, tools=[tool.build()], model=MODEL)
            return await Runner.run(agent, QUESTION, run_config=RunConfig(tracing_disabled=True))

    result = model.call(main)
    assert tool.runs == [{"city": "Paris"}]
    assert result.final_output == ANSWER
    assert_model_saw_the_tool_round_trip(model)
