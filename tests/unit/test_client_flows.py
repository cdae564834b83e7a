"""The client's sans-I/O flows: how a turn's end becomes ``TurnFailedError``, and the ReAct loop, without a server."""

from __future__ import annotations

import json

import pytest

from ferryman.api.content import ToolResponse
from ferryman.api.response_events import ResponseCancelled, ResponseCreated
from ferryman.api.responses import FunctionCallItem, Response, ResponseError
from ferryman.client import AsyncAgent, AsyncClient, AsyncReActAgent, ConflictError, InternalServerError
from ferryman.client._agent_flow import AgentsFlow, failed_call
from ferryman.client._agent_setup import AgentSetup, Api
from ferryman.client._react_flow import ReActTools
from ferryman.client._responses_flow import ResponsesFlow
from ferryman.client.events import StepCompleted, StepProgress, StepStarted, TurnCompleted, TurnFailed, TurnStarted
from ferryman.client.tools import ClientTool


def weather(city: str) -> str:
    """The weather of a city.

    Args:
        city: The city.
    """
    return f"{city}: sunny"


def response(response_id: str, status: str = "completed", error: ResponseError | None = None) -> Response:
    """A response of the given status."""
    return Response(id=response_id, created_at=0, status=status, model="m", error=error)


def test_a_stream_that_ends_before_the_turn_did_is_interrupted() -> None:
    flow = AgentsFlow.reader(frozenset())
    failure = flow.failure
    assert failure is not None and (failure.code, failure.turn_id) == ("interrupted", None)


def test_a_cancelled_response_fails_the_turn_cancelled() -> None:
    flow = ResponsesFlow("conv_1", {"model": "m"}, [], stream=True)
    flow.on_event(ResponseCreated(sequence_number=0, response=response("resp_1", "in_progress")))
    stopped = response("resp_1", "cancelled", ResponseError(code="cancelled", message="stopped"))
    [event] = flow.on_event(ResponseCancelled(sequence_number=1, response=stopped))
    assert isinstance(event, TurnFailed) and (event.code, event.turn_id) == ("cancelled", "resp_1")
    failure = flow.failure
    assert failure is not None and (failure.code, failure.message, failure.response_id) == (
        "cancelled", "stopped", "resp_1")  # fmt: skip
    # Not streamed, a cancelled response is answered with status 200: it fails the turn all the same.
    unstreamed = ResponsesFlow("conv_1", {"model": "m"}, [], stream=False)
    [event] = unstreamed.on_result(stopped)
    assert isinstance(event, TurnFailed) and unstreamed.failure is not None


def test_an_error_event_of_no_known_shape_fails_the_turn_with_its_code() -> None:
    flow = ResponsesFlow("conv_1", {"model": "m"}, [], stream=True)
    flow.on_event(ResponseCreated(sequence_number=0, response=response("resp_1", "in_progress")))
    [event] = flow.on_event({"type": "error", "code": "server_error", "message": "overloaded"})
    assert isinstance(event, TurnFailed) and (event.code, event.message, event.turn_id) == (
        "server_error", "overloaded", "resp_1")  # fmt: skip
    assert flow.on_event({"type": "response.something_new"}) == []


def test_only_an_error_answer_that_says_a_turn_failed_is_a_turn_failure() -> None:
    said = ConflictError("turn t-1 failed: stopped\nby the client", 409, "cancelled")
    assert failed_call(said) == ("t-1", "stopped\nby the client")
    rejected = ConflictError("the session has a running turn", 409, "conflict")
    with pytest.raises(ConflictError) as raised:
        failed_call(rejected)
    assert raised.value is rejected
    flow = AgentsFlow("a", "s", [], None, stream=False, client_tools=frozenset())
    [event] = flow.rejected(InternalServerError("turn t-2 failed: boom", 500, "internal_error", body={"x": 1}))
    assert isinstance(event, TurnFailed) and (event.turn_id, event.code, event.message) == (
        "t-2", "internal_error", "boom")  # fmt: skip
    failure = flow.failure
    assert failure is not None and (failure.status_code, failure.body, failure.turn_id) == (500, {"x": 1}, "t-2")
    assert isinstance(failure.__cause__, InternalServerError)


def react_reply(turn_id: str, body: object) -> TurnCompleted:
    """A server turn that completed with ``body`` (JSON unless a string) as the model's output."""
    text = body if isinstance(body, str) else json.dumps(body)
    return TurnCompleted(turn_id=turn_id, output_text=text, step_count=1, result=response(turn_id))


def test_the_react_loop_is_one_turn_for_the_caller() -> None:
    tool = ClientTool(weather)
    loop = ReActTools([tool], max_iterations=5).loop("Weather in Oslo?")
    assert loop.next_message() == "Weather in Oslo?"
    assert loop.on_event(TurnStarted(turn_id="t1")) == [TurnStarted(turn_id="t1")]
    action = {"thought": "Look it up.", "action": {"tool_name": "weather", "arguments": {"city": "Oslo"}}}
    started, issued = loop.on_event(react_reply("t1", action))
    assert isinstance(started, StepStarted) and started.metadata.server_side is False
    assert loop.action is not None and loop.tool_for(loop.action) is tool
    [completed] = loop.observe(ToolResponse(call_id=loop.action.call_id, tool_name="weather", content="Oslo: sunny"))
    assert isinstance(completed, StepCompleted) and isinstance(issued, StepProgress)
    assert completed.step_id == started.step_id == issued.step_id
    assert loop.next_message() == "Observation: Oslo: sunny"
    assert loop.on_event(TurnStarted(turn_id="t2")) == []  # the next server turn goes on the caller's turn
    assert loop.on_event(react_reply("t2", "no json")) == []
    assert str(loop.next_message()).startswith("Observation: Your output does not fit the JSON format")
    assert loop.on_event(react_reply("t3", {"thought": "Known.", "answer": "Sunny."})) == []
    assert loop.next_message() is None
    [done] = loop.finish()
    assert isinstance(done, TurnCompleted)
    assert (done.turn_id, done.output_text, done.step_count) == ("t1", "Sunny.", 4)
    assert loop.result("s1").answer == "Sunny." and len(loop.result("s1").iterations) == 3


def test_the_react_loop_stops_after_max_iterations_without_an_answer() -> None:
    loop = ReActTools([], max_iterations=1).loop("Go.")
    loop.on_event(react_reply("t1", "no json"))
    assert loop.next_message() is None
    [done] = loop.finish()
    assert isinstance(done, TurnCompleted) and done.output_text == "" and loop.result("s").answer is None
    with pytest.raises(ValueError, match="at least 1"):
        ReActTools([], max_iterations=0)


def test_an_async_react_agent_is_an_async_agent_stored_on_its_first_session() -> None:
    react = AsyncReActAgent(AsyncClient(base_url="http://ferryman.invalid"), "m", tools=[weather])
    assert isinstance(react, AsyncAgent) and react.agent_id is None
    assert list(react.tools) == ["weather"] and "- weather: The weather of a city." in react.setup.instructions
    assert react.setup.agent_config["response_format"]["name"] == "react_step"


def test_a_failed_server_turn_ends_the_react_loop() -> None:
    loop = ReActTools([], max_iterations=3).loop("Go.")
    loop.on_event(TurnStarted(turn_id="t1"))
    [failed] = loop.on_event(TurnFailed(turn_id="t1", code="cancelled", message="stopped"))
    assert isinstance(failed, TurnFailed) and failed.code == "cancelled"
    assert loop.next_message() is None and loop.finish() == []


@pytest.mark.parametrize("api", ["agents", "responses"])
def test_a_multitask_strategy_goes_with_the_turns_first_call_only(api: Api) -> None:
    setup = AgentSetup("m", "", [weather], api, None, {})
    plain = setup.flow("agent_1", "conv_1", "Weather?", None, stream=False).first_call()
    assert "multitask_strategy" not in plain.kwargs, "unset: the server's default"
    flow = setup.flow("agent_1", "conv_1", "Weather?", None, stream=False, multitask_strategy="enqueue")
    assert flow.first_call().kwargs["multitask_strategy"] == "enqueue"
    if api == "responses":  # the turn's later responses continue it: they go with the server's default
        call = FunctionCallItem(id="fc_1", call_id="call_1", name="weather", arguments='{"city": "Oslo"}')
        paused = response("resp_1").model_copy(update={"output": [call]})
        flow.on_result(paused)
        pending = flow.pending
        assert pending is not None
        [asked] = pending.tool_calls
        _, follow_up = flow.answer([ToolResponse(call_id=asked.call_id, tool_name="weather", content="sunny")], [])
        assert follow_up.target == ("responses", "create") and "multitask_strategy" not in follow_up.kwargs
