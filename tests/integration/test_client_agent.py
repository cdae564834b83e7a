"""``ferryman.client.Agent`` against the in-process server and its scripted model, on both APIs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from rich.console import Console

from ferryman.api.agents import Turn
from ferryman.api.approvals import ApprovalRequest
from ferryman.api.responses import Response
from ferryman.client import Agent, Client, EventLogger, ReActAgent, client_tool
from ferryman.client.events import (
    AgentEvent,
    StepCompleted,
    StepProgress,
    StepStarted,
    TextDelta,
    ToolCallIssued,
    TurnAwaitingInput,
    TurnCompleted,
)
from ferryman.testing import ScriptedReply, ScriptedToolCall
from inprocess import BASE_URL, Served

MODEL = "scripted-model"
runs: list[str] = []


@client_tool
def get_weather(city: str) -> str:
    """Current weather of a city.

    Args:
        city: The city's name.
    """
    runs.append(city)
    return f"{city}: sunny"


@client_tool
def explode(reason: str) -> str:
    """A tool that always fails.

    Args:
        reason: Why.
    """
    raise RuntimeError(reason)


@pytest.fixture()
def client(model: Served) -> Iterator[Client]:
    """A client of the in-process server that never retries a request."""
    runs.clear()
    with Client(base_url=BASE_URL, http_client=model.http_client(), max_retries=0) as sdk:
        yield sdk


def kinds(events: list[AgentEvent]) -> list[str]:
    """Each event's type, with the step type where it has one; a run of progress events counts once."""
    named = [f"{e.type}:{e.step_type}" if isinstance(e, StepStarted | StepCompleted) else e.type for e in events]
    return [kind for i, kind in enumerate(named) if not (kind == "step_progress" and named[i - 1] == kind)]


def weather_round_trip(model: Served) -> None:
    """The model calls get_weather for Paris, then answers."""
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    model.enqueue_text("It is sunny in Paris.")


def tool_messages(request: dict[str, Any]) -> list[str]:
    """The tool results the model was sent."""
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_a_client_tool_runs_and_the_same_turn_goes_on(client: Client, model: Served) -> None:
    agent = Agent(client, MODEL, "Be brief.", tools=[get_weather])
    session_id = agent.create_session("weather")
    weather_round_trip(model)
    events = list(agent.create_turn("Weather in Paris?", session_id))
    assert kinds(events) == [
        "turn_started",
        "step_started:inference",
        "step_progress",
        "step_completed:inference",
        "step_started:tool_execution",
        "turn_awaiting_input",
        "step_completed:tool_execution",
        "step_started:inference",
        "step_progress",
        "step_completed:inference",
        "turn_completed",
    ]
    assert runs == ["Paris"]
    tool_step = next(e for e in events if isinstance(e, StepStarted) and e.step_type == "tool_execution")
    assert tool_step.metadata.server_side is False
    issued = [e.delta for e in events if isinstance(e, StepProgress) and isinstance(e.delta, ToolCallIssued)]
    assert [(d.tool_call.tool_name, d.tool_call.arguments) for d in issued] == [("get_weather", {"city": "Paris"})]
    done = events[-1]
    assert isinstance(done, TurnCompleted) and isinstance(done.result, Turn)
    assert {e.turn_id for e in events} == {done.turn_id}
    assert (done.output_text, done.step_count, done.usage.total_tokens > 0) == ("It is sunny in Paris.", 3, True)
    assert tool_messages(model.requests()[1]) == ["Paris: sunny"]


def test_a_non_streamed_turn_returns_the_final_turn(client: Client, model: Served) -> None:
    agent = Agent(client, MODEL, "Be brief.", tools=[get_weather])
    agent.create_session()
    weather_round_trip(model)
    turn = agent.create_turn([{"role": "user", "content": "Weather?"}], stream=False)
    assert isinstance(turn, Turn)
    assert (turn.status, turn.output_message.content, runs) == ("completed", "It is sunny in Paris.", ["Paris"])
    assert [s.step_type for s in turn.steps] == ["inference", "tool_execution", "inference"]


def test_a_tool_that_raises_tells_the_model_and_the_turn_goes_on(client: Client, model: Served) -> None:
    agent = Agent(client, MODEL, "Be brief.", tools=[explode])
    agent.create_session()
    model.enqueue_tool_call("explode", {"reason": "no fuel"})
    model.enqueue_text("The tool failed.")
    done = list(agent.create_turn("Go."))[-1]
    assert isinstance(done, TurnCompleted) and done.output_text == "The tool failed."
    assert tool_messages(model.requests()[1]) == ["error: RuntimeError: no fuel"]


def test_approved_and_refused_server_calls(client: Client, model: Served) -> None:
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    approving = Agent(client, MODEL, "Math.", tools=["builtin::math"], require_approval="always", on_approval=approve)
    approving.create_session()
    model.enqueue_tool_call("calculator", {"expression": "6 * 7"})
    model.enqueue_text("42.")
    events = list(approving.create_turn("6*7?"))
    [awaiting] = [e for e in events if isinstance(e, TurnAwaitingInput)]
    assert [(r.tool_name, r.arguments) for r in awaiting.approval_requests] == [("calculator", {"expression": "6 * 7"})]
    assert asked == awaiting.approval_requests
    assert tool_messages(model.requests()[1]) == ["42"]

    # Without a callback, a call awaiting approval is refused: it never runs.
    refusing = Agent(client, MODEL, "Math.", tools=["builtin::math"], require_approval="always")
    refusing.create_session()
    model.enqueue_tool_call("calculator", {"expression": "1 + 1"})
    model.enqueue_text("I may not.")
    turn = refusing.create_turn("1+1?", stream=False)
    assert isinstance(turn, Turn) and turn.status == "completed"
    assert tool_messages(model.requests()[3]) == [
        "the user denied this call: refused: the agent has no on_approval callback"
    ]


class CutOnce:
    """Forwards to the in-process server, cutting the first turn stream after ``after`` events."""

    def __init__(self, model: Served, after: int) -> None:
        self.model, self.after, self.cut = model, after, False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        http = self.model.http
        sent = http.send(
            http.build_request(request.method, str(request.url), headers=request.headers.multi_items(),
                               content=request.read()),
            stream=True,
        )  # fmt: skip
        body: Any = sent.stream
        if not self.cut and request.method == "POST" and request.url.path.endswith("/turn"):
            self.cut, body = True, _cut_after(sent.stream, self.after)
        return httpx.Response(sent.status_code, headers=sent.headers.multi_items(), stream=_Bytes(body, sent))


def _cut_after(chunks: Any, events: int) -> Iterator[bytes]:
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        if buffer.count(b"\n\n") >= events:
            end = 0
            for _ in range(events):
                end = buffer.index(b"\n\n", end) + 2
            yield buffer[:end]
            raise httpx.ReadError("connection dropped (test)")
    yield buffer


class _Bytes(httpx.SyncByteStream):
    def __init__(self, chunks: Any, response: Any) -> None:
        self._chunks, self._response = chunks, response

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._chunks)

    def close(self) -> None:
        self._response.close()


def test_a_dropped_stream_is_read_on_with_no_event_lost_or_repeated(model: Served) -> None:
    def run(http: httpx.Client) -> list[AgentEvent]:
        with Client(base_url=BASE_URL, http_client=http, max_retries=2) as sdk:
            agent = Agent(sdk, MODEL, "Be brief.", tools=[get_weather])
            agent.create_session()
            weather_round_trip(model)
            return list(agent.create_turn("Weather?"))

    whole = run(model.http_client())
    cutter = CutOnce(model, after=4)
    dropped = run(httpx.Client(transport=httpx.MockTransport(cutter), base_url=BASE_URL))
    assert cutter.cut
    assert kinds(dropped) == kinds(whole)
    texts = "".join(e.delta.text for e in dropped if isinstance(e, StepProgress) and isinstance(e.delta, TextDelta))
    assert texts == "It is sunny in Paris."
    step_ids = [e.step_id for e in dropped if isinstance(e, StepCompleted)]
    assert len(step_ids) == len(set(step_ids)) == 3
    assert runs == ["Paris", "Paris"]  # once per turn, none repeated by the reconnection


def test_responses_api_runs_client_tools_in_a_conversation(client: Client, model: Served) -> None:
    agent = Agent(client, MODEL, "Be brief.", tools=[get_weather], api="responses")
    conversation = agent.create_session("weather")
    assert conversation.startswith("conv")
    assert agent.agent_id is None
    weather_round_trip(model)
    events = list(agent.create_turn("Weather in Paris?"))
    assert kinds(events) == [
        "turn_started",
        "step_started:inference",
        "step_progress",
        "step_completed:inference",
        "step_started:tool_execution",
        "turn_awaiting_input",
        "step_completed:tool_execution",
        "step_started:inference",
        "step_progress",
        "step_completed:inference",
        "turn_completed",
    ]
    done = events[-1]
    assert isinstance(done, TurnCompleted) and isinstance(done.result, Response)
    assert (done.output_text, done.step_count, runs) == ("It is sunny in Paris.", 3, ["Paris"])
    assert {e.turn_id for e in events} == {done.turn_id}
    second = model.requests()[1]
    assert tool_messages(second) == ["Paris: sunny"]
    assert second["tools"][0]["function"]["name"] == "get_weather"
    # Non-streamed, the turn ends with the last response; the conversation kept the first turn.
    model.enqueue_text("Still sunny.")
    response = agent.create_turn("And now?", stream=False)
    assert isinstance(response, Response) and response.conversation is not None
    assert response.conversation.id == conversation
    assert "Paris: sunny" in [m.get("content") for m in model.requests()[2]["messages"]]


def test_the_event_logger_prints_steps_tool_calls_results_and_tokens(client: Client, model: Served) -> None:
    agent = Agent(client, MODEL, "Be brief.", tools=[get_weather, explode])
    agent.create_session()
    model.enqueue(
        ScriptedReply(
            tool_calls=[
                ScriptedToolCall(name="get_weather", arguments={"city": "Paris"}),
                ScriptedToolCall(name="explode", arguments={"reason": "[red]markup[/red]"}),
            ]
        )
    )
    model.enqueue_text("Sunny; the other tool failed.")
    console = Console(record=True, width=120, color_system=None)
    last = EventLogger(console).print_turn(agent.create_turn("Go."))
    assert isinstance(last, TurnCompleted)
    printed = console.export_text()
    assert "→ get_weather(city='Paris')" in printed
    assert "← get_weather: Paris: sunny" in printed
    assert "← explode: error: RuntimeError: [red]markup[/red]" in printed  # text, never markup
    assert "▸ tool_execution (client)" in printed
    assert "Sunny; the other tool failed.\n" in printed
    usage = last.usage
    assert f"3 steps, {usage.input_tokens} input + {usage.output_tokens} output tokens" in printed


def test_react_agent_acts_observes_and_answers(client: Client, model: Served) -> None:
    react = ReActAgent(client, MODEL, tools=[get_weather])
    act = {"thought": "I need the weather.", "action": {"tool_name": "get_weather", "arguments": {"city": "Oslo"}}}
    model.enqueue_text(json.dumps(act))
    model.enqueue_text("not json")
    model.enqueue_text(json.dumps({"thought": "Done.", "action": None, "answer": "Sunny in Oslo."}))
    seen: list[AgentEvent] = []
    result = react.run("Weather in Oslo?", on_event=seen.append)
    assert result.answer == "Sunny in Oslo."
    assert [i.observation for i in result.iterations][0] == "Oslo: sunny"
    assert result.iterations[1].step is None and "does not fit" in (result.iterations[1].observation or "")
    assert runs == ["Oslo"]
    first, second, _ = model.requests()
    assert first["response_format"]["type"] == "json_schema"
    assert "get_weather" in first["messages"][0]["content"] and "tools" not in first
    assert second["messages"][-1]["content"] == "Observation: Oslo: sunny"
    # Three turns of the server, one turn for the caller: it completes once, with the answer.
    [completed] = [e for e in seen if isinstance(e, TurnCompleted)]
    assert completed.output_text == "Sunny in Oslo." and seen[-1] == completed
