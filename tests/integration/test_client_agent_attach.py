"""An agent stored before (``Agent.attach``), a turn's events replayed whole, approvals on the Responses API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from ferryman.api.approvals import ApprovalRequest
from ferryman.api.responses import Response
from ferryman.client import Agent, AsyncAgent, AsyncClient, Client, NotFoundError, client_tool
from ferryman.client.events import (
    AgentEvent,
    StepCompleted,
    TurnAwaitingInput,
    TurnCompleted,
    TurnStarted,
    afrom_server,
    from_server,
)
from ferryman.testing import Script, ScriptedReply, ScriptedToolCall
from file_search_support import KEYWORD_SEARCH, seed_vector_store
from inprocess import BASE_URL, Served, check_script, migrated_sqlite, served_services, serving

MODEL = "scripted-model"
HANDBOOK = "Ferries leave the harbour at nine; tickets cost four euros."


@client_tool
def ferry_time(harbour: str) -> str:
    """The next ferry's departure.

    Args:
        harbour: Where from.
    """
    return f"{harbour}: 09:00"


@client_tool
def fare(harbour: str) -> str:
    """A ticket's price.

    Args:
        harbour: Where from.
    """
    return "4 EUR"


@pytest.fixture()
def client(model: Served) -> Iterator[Client]:
    """A client of the in-process server that never retries a request."""
    with Client(base_url=BASE_URL, http_client=model.http_client(), max_retries=0) as sdk:
        yield sdk


def _ask_time(model: Served) -> None:
    model.enqueue_tool_call("ferry_time", {"harbour": "Kiel"})
    model.enqueue_text("At nine.")


def _steps(events: list[AgentEvent]) -> list[str]:
    return [e.step_type for e in events if isinstance(e, StepCompleted)]


def test_an_attached_agent_runs_the_stored_agents_client_tools(client: Client, model: Served) -> None:
    stored = Agent(client, MODEL, "Be brief.", tools=[ferry_time, fare])
    attached = Agent.attach(client, str(stored.agent_id), tools=[ferry_time])
    assert (attached.agent_id, attached.setup.model, attached.setup.instructions) == (
        stored.agent_id,
        MODEL,
        "Be brief.",
    )
    attached.create_session()
    _ask_time(model)
    done = list(attached.create_turn("Next ferry from Kiel?"))[-1]
    assert isinstance(done, TurnCompleted) and done.output_text == "At nine."
    # A tool the agent declares but the caller did not give is answered with an error, not left hanging.
    model.enqueue_tool_call("fare", {"harbour": "Kiel"})
    model.enqueue_text("I cannot tell.")
    assert isinstance(list(attached.create_turn("Fare?"))[-1], TurnCompleted)
    assert _tool_messages(model.requests()[3])[-1] == "error: no client tool named 'fare'"

    with pytest.raises(ValueError, match="ferry_time"):
        Agent.attach(client, str(Agent(client, MODEL, "No tools.").agent_id), tools=[ferry_time])
    with pytest.raises(NotFoundError):
        Agent.attach(client, "no-such-agent")


def test_a_paused_and_resumed_turn_replays_whole(client: Client, model: Served) -> None:
    agent = Agent(client, MODEL, "Be brief.", tools=[ferry_time])
    session_id = agent.create_session()
    _ask_time(model)
    live = list(agent.create_turn("Next ferry from Kiel?"))
    turn_id = live[-1].turn_id
    agent_id = str(agent.agent_id)

    with client.agents.turns.events(agent_id, session_id, turn_id, through_pauses=True) as stream:
        replayed = list(from_server(stream, client_tools=["ferry_time"]))
    assert [type(e) for e in replayed].count(TurnStarted) == 1
    [paused] = [e for e in replayed if isinstance(e, TurnAwaitingInput)]
    assert [c.tool_name for c in paused.tool_calls] == ["ferry_time"]
    assert _steps(replayed) == _steps(live) == ["inference", "tool_execution", "inference"]
    assert isinstance(replayed[-1], TurnCompleted) and replayed[-1].output_text == "At nine."
    # Without through_pauses the events route ends where the turn first paused.
    with client.agents.turns.events(agent_id, session_id, turn_id) as stream:
        first_run = list(from_server(stream))
    assert isinstance(first_run[-1], TurnAwaitingInput) and _steps(first_run) == ["inference"]


def test_a_turn_still_paused_replays_to_its_pause_and_ends(client: Client, model: Served) -> None:
    agent_id = Agent(client, MODEL, "Be brief.", tools=[ferry_time]).agent_id
    assert agent_id is not None
    session_id = client.agents.sessions.create(agent_id, session_name="paused").session_id
    model.enqueue_tool_call("ferry_time", {"harbour": "Kiel"})
    turn = client.agents.turns.create(agent_id, session_id, messages=[{"role": "user", "content": "When?"}])
    assert turn.status == "awaiting_input"

    with client.agents.turns.events(agent_id, session_id, turn.turn_id, through_pauses=True) as stream:
        replayed = list(from_server(stream))
    assert isinstance(replayed[-1], TurnAwaitingInput) and _steps(replayed) == ["inference"]


@pytest.fixture()
async def served(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[AsyncClient, Script]]:
    """An ``AsyncClient`` of a server on this loop, and the script of its model."""
    script = Script()
    services = served_services(Path(migrated_sqlite(tmp_path / "attach.db")), script)
    async with serving(services) as http, AsyncClient(base_url=BASE_URL, http_client=http, max_retries=0) as sdk:
        yield sdk, script
    check_script(request, script)


@pytest.mark.anyio
async def test_an_async_attached_agent_and_an_async_replay(served: tuple[AsyncClient, Script]) -> None:
    sdk, script = served
    stored = AsyncAgent(sdk, MODEL, "Be brief.", tools=[ferry_time])
    await stored.initialize()
    agent = await AsyncAgent.attach(sdk, str(stored.agent_id), tools=[ferry_time])
    session_id = await agent.create_session()
    script.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="ferry_time", arguments={"harbour": "Kiel"})]),
        ScriptedReply(text="At nine."),
    )
    live = [event async for event in await agent.create_turn("Next ferry from Kiel?")]
    stream = sdk.agents.turns.events(str(agent.agent_id), session_id, live[-1].turn_id, through_pauses=True)
    async with stream:
        replayed = [event async for event in afrom_server(stream)]
    assert _steps(replayed) == _steps(live) == ["inference", "tool_execution", "inference"]
    assert isinstance(replayed[-1], TurnCompleted) and replayed[-1].output_text == "At nine."


@pytest.fixture()
def held_search(model: Served) -> dict[str, Any]:
    """A file_search toolgroup reference whose every call waits for approval."""
    docs = seed_vector_store(model, {"handbook.md": HANDBOOK})
    return {
        "type": "file_search",
        "vector_store_ids": [docs.vector_store_id],
        "ranking_options": KEYWORD_SEARCH,
        "require_approval": "always",
    }


def _search_then(model: Served, answer: str) -> None:
    model.enqueue_tool_call("file_search", {"query": "harbour"})
    model.enqueue_text(answer)


def _tool_messages(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("stream", [True, False])
def test_responses_mode_asks_for_approval_and_runs_an_approved_call(
    client: Client, model: Served, held_search: dict[str, Any], stream: bool
) -> None:
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    agent = Agent(client, MODEL, "Search first.", tools=[held_search], api="responses", on_approval=approve)
    agent.create_session()
    _search_then(model, "At nine.")
    if stream:
        events = list(agent.create_turn("When do ferries leave?"))
        [awaiting] = [e for e in events if isinstance(e, TurnAwaitingInput)]
        assert asked == awaiting.approval_requests
        done = events[-1]
        assert isinstance(done, TurnCompleted) and done.output_text == "At nine."
        assert "tool_execution" in _steps(events)
    else:
        response = agent.create_turn("When do ferries leave?", stream=False)
        assert isinstance(response, Response) and response.status == "completed"
        assert [item.type for item in response.output] == ["file_search_call", "message"]
    assert [(r.tool_name, r.arguments) for r in asked] == [("file_search", {"query": "harbour"})]
    [searched] = _tool_messages(model.requests()[1])
    assert "nine" in searched


@pytest.mark.parametrize(
    ("on_approval", "reason"),
    [(None, "refused: the agent has no on_approval callback"), (lambda request: False, "refused by the caller")],
)
def test_responses_mode_refuses_a_denied_call(
    client: Client, model: Served, held_search: dict[str, Any], on_approval: Any, reason: str
) -> None:
    refusing = Agent(client, MODEL, "Search first.", tools=[held_search], api="responses", on_approval=on_approval)
    refusing.create_session()
    _search_then(model, "I may not search.")
    events = list(refusing.create_turn("When do ferries leave?"))
    done = events[-1]
    assert isinstance(done, TurnCompleted) and done.output_text == "I may not search."
    assert "tool_execution" not in _steps(events)  # the search never ran
    [refusal] = _tool_messages(model.requests()[1])
    assert reason in refusal and "nine" not in refusal
