"""``ReActAgent`` and ``AsyncReActAgent``: an ``Agent`` and an ``AsyncAgent`` whose turn is a ReAct loop."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from rich.console import Console

from ferryman.api.agents import ToolExecutionStep, Turn
from ferryman.api.responses import Response
from ferryman.client import (
    Agent,
    AsyncAgent,
    AsyncClient,
    AsyncReActAgent,
    Client,
    EventLogger,
    ReActAgent,
    TurnFailedError,
    client_tool,
)
from ferryman.client.events import AgentEvent, StepCompleted, StepStarted, TurnCompleted, TurnFailed
from ferryman.testing import Script, ScriptedError, ScriptedReply
from inprocess import BASE_URL, Served, check_script, migrated_sqlite, served_services, serving

MODEL = "scripted-model"


@client_tool
def get_weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: The city's name.
    """
    return f"{city}: sunny"


@client_tool
async def double(x: int) -> int:
    """Double a number.

    Args:
        x: The number.
    """
    return 2 * x


def step(thought: str, answer: str | None = None, **action: object) -> ScriptedReply:
    """The model's ReAct JSON: an action (``tool_name``, ``arguments``) or the answer."""
    body = {"thought": thought, "action": action or None, "answer": answer}
    return ScriptedReply(text=json.dumps(body))


def kinds(events: list[AgentEvent]) -> list[str]:
    """Each event's type, with the step type where it has one; a run of progress events counts once."""
    named = [f"{e.type}:{e.step_type}" if isinstance(e, StepStarted | StepCompleted) else e.type for e in events]
    return [kind for i, kind in enumerate(named) if not (kind == "step_progress" and named[i - 1] == kind)]


ONE_ACTION = [
    "turn_started",
    "step_started:inference",
    "step_progress",
    "step_completed:inference",
    "step_started:tool_execution",
    "step_progress",
    "step_completed:tool_execution",
    "step_started:inference",
    "step_progress",
    "step_completed:inference",
    "turn_completed",
]


@pytest.fixture()
def client(model: Served) -> Iterator[Client]:
    """A client of the in-process server that never retries a request."""
    with Client(base_url=BASE_URL, http_client=model.http_client(), max_retries=0) as sdk:
        yield sdk


@pytest.mark.parametrize("api", ["agents", "responses"])
def test_a_react_agent_is_an_agent_and_its_turn_is_one_turn(client: Client, model: Served, api: str) -> None:
    react = ReActAgent(client, MODEL, tools=[get_weather], api=api)  # type: ignore[arg-type]
    assert isinstance(react, Agent)
    react.create_session()
    model.enqueue(step("I need the weather.", tool_name="get_weather", arguments={"city": "Oslo"}))
    model.enqueue(step("Done.", answer="Sunny in Oslo."))
    console = Console(record=True, width=120, color_system=None)
    events = list(EventLogger(console).log(react.create_turn("Weather in Oslo?")))
    assert kinds(events) == ONE_ACTION
    done = events[-1]
    assert isinstance(done, TurnCompleted) and done.output_text == "Sunny in Oslo."
    assert isinstance(done.result, Turn if api == "agents" else Response)
    assert {e.turn_id for e in events} == {done.turn_id}
    assert done.step_count == 3
    [tool_step] = [e.step for e in events if isinstance(e, StepCompleted) and isinstance(e.step, ToolExecutionStep)]
    assert [r.content for r in tool_step.tool_responses] == ["Oslo: sunny"]
    printed = console.export_text()
    assert "→ get_weather(city='Oslo')" in printed and "← get_weather: Oslo: sunny" in printed
    first, second = model.requests()
    assert "get_weather" in first["messages"][0]["content"] and "tools" not in first
    assert second["messages"][-1]["content"] == "Observation: Oslo: sunny"

    # Not streamed, the turn returns the last turn's final object, as an Agent's does.
    model.enqueue(step("Known.", answer="Still sunny."))
    result = react.create_turn("And now?", stream=False)
    assert isinstance(result, Turn if api == "agents" else Response)


def test_a_failed_react_turn_raises_turn_failed_error(client: Client, model: Served) -> None:
    react = ReActAgent(client, MODEL, tools=[get_weather])
    react.create_session()
    model.enqueue(step("I need the weather.", tool_name="get_weather", arguments={"city": "Oslo"}))
    model.enqueue(ScriptedReply(error=ScriptedError(status_code=400, message="no")))
    seen: list[AgentEvent] = []
    with pytest.raises(TurnFailedError) as raised:
        for event in react.create_turn("Weather in Oslo?"):
            seen.append(event)
    assert raised.value.code == "upstream_error"
    assert isinstance(seen[-1], TurnFailed) and seen[-1].turn_id == seen[0].turn_id
    with pytest.raises(TurnFailedError):
        model.enqueue(ScriptedReply(error=ScriptedError(status_code=400, message="no")))
        react.run("Again?")


def test_tools_passed_where_the_instructions_go_are_refused(client: Client) -> None:
    with pytest.raises(TypeError, match="tools="):
        ReActAgent(client, MODEL, [get_weather], api="responses")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="client tools only"):
        ReActAgent(client, MODEL, tools=["builtin::math"], api="responses")  # type: ignore[list-item]


@pytest.fixture()
async def served(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[AsyncClient, Script]]:
    """An ``AsyncClient`` of a server on this loop, and the script of its model."""
    script = Script()
    services = served_services(Path(migrated_sqlite(tmp_path / "react.db")), script)
    async with serving(services) as http, AsyncClient(base_url=BASE_URL, http_client=http, max_retries=0) as client:
        yield client, script
    check_script(request, script)


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["agents", "responses"])
async def test_an_async_react_turn_runs_its_client_tool(served: tuple[AsyncClient, Script], api: str) -> None:
    client, script = served
    react = AsyncReActAgent(client, MODEL, tools=[double], api=api)  # type: ignore[arg-type]
    assert isinstance(react, AsyncAgent)
    await react.create_session("react")
    script.enqueue(step("Double it.", tool_name="double", arguments={"x": 21}), step("Done.", answer="42"))
    events = [event async for event in await react.create_turn("Double 21.")]
    assert kinds(events) == ONE_ACTION
    done = events[-1]
    assert isinstance(done, TurnCompleted) and done.output_text == "42"
    assert script.requests[1]["messages"][-1]["content"] == "Observation: 42"

    # ``run`` is the same loop, each iteration kept; an unknown tool is told to the model.
    script.enqueue(step("Try.", tool_name="triple", arguments={"x": 1}), step("Done.", answer="none"))
    result = await react.run("Triple 1.")
    assert result.answer == "none" and result.session_id != react.sessions[0]
    assert result.iterations[0].observation == "error: no tool named 'triple'; the tools are ['double']"
