"""``llama_stack_client`` 0.2.12 on a turn whose MCP toolgroup went down after the ``Agent`` was made.

The turn completes; its stream, its ``Turn`` and ``EventLogger`` carry the ``tool_execution`` step that
names the toolgroup and why its tools could not be listed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hosted_support import served_locally
from llama_stack_client import LlamaStackClient
from llama_stack_client.lib.agents.agent import Agent
from llama_stack_client.lib.agents.event_logger import EventLogger
from llama_stack_client.types import ToolExecutionStep
from llama_stack_client.types.agents.turn_response_event_payload import AgentTurnResponseStepCompletePayload

from inprocess import BASE_URL, Served, check_script
from mcp_servers import start_mcp_server, stop_mcp_server

GROUP = "mcp::flaky"


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Ferryman allowed to reach 127.0.0.1 (the test MCP server), for this module."""
    with served_locally(tmp_path_factory.mktemp("unlisted") / "ferryman.db") as server:
        yield server


@pytest.fixture()
def model(local_server: Served, request: pytest.FixtureRequest) -> Iterator[Served]:
    local_server.reset()
    yield local_server
    check_script(request, local_server.script)


@pytest.fixture()
def agent(model: Served) -> Iterator[Agent]:
    """An ``Agent`` with the calculator and an MCP group whose server stops once the agent knows its tools."""
    with LlamaStackClient(base_url=BASE_URL, http_client=model.http_client(), max_retries=0) as client:
        server = start_mcp_server("streamable_http")
        try:
            client.toolgroups.register(
                toolgroup_id=GROUP, provider_id="model-context-protocol", mcp_endpoint={"uri": server.url}
            )
            made = Agent(client, model="scripted-model", instructions="Be brief.", tools=["builtin::math", GROUP])
            assert "add" in made.builtin_tools
        finally:
            stop_mcp_server(server)
        yield made
        client.toolgroups.unregister(GROUP)


def _check_step(step: object) -> None:
    assert isinstance(step, ToolExecutionStep)
    [call], [response] = step.tool_calls, step.tool_responses
    assert (call.tool_name, call.arguments) == ("list_tools", {"toolgroup_id": GROUP})
    assert response.call_id == call.call_id
    assert isinstance(response.content, str)
    assert response.content.startswith(f"error: the tools of '{GROUP}' could not be listed: ")
    assert response.metadata == {"error": True, "toolgroup_id": GROUP}


def test_the_streamed_turn_parses_and_the_event_logger_prints_the_step(
    agent: Agent, model: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    model.enqueue_text("The flaky tools are unavailable.")
    session_id = agent.create_session("s")

    chunks = list(agent.create_turn(messages=[{"role": "user", "content": "hi"}], session_id=session_id))
    for log in EventLogger().log(iter(chunks)):
        log.print()

    completed = [c.event.payload for c in chunks if isinstance(c.event.payload, AgentTurnResponseStepCompletePayload)]
    _check_step(completed[0].step_details)
    turn = chunks[-1].event.payload.turn
    assert turn.output_message.content == "The flaky tools are unavailable."
    assert [step.step_type for step in turn.steps] == ["tool_execution", "inference"]
    out = capsys.readouterr().out
    assert f"tool_execution> Tool:list_tools Args:{{'toolgroup_id': '{GROUP}'}}" in out
    assert f"tool_execution> Tool:list_tools Response:error: the tools of '{GROUP}' could not be listed" in out
    assert [tool["function"]["name"] for tool in model.requests()[0]["tools"]] == ["calculator"]


def test_the_non_streamed_turn_parses_with_the_step(agent: Agent, model: Served) -> None:
    model.enqueue_text("Unavailable.")
    session_id = agent.create_session("s")

    turn = agent.create_turn(messages=[{"role": "user", "content": "hi"}], session_id=session_id, stream=False)

    assert turn.output_message.content == "Unavailable."
    _check_step(turn.steps[0])
    assert agent.client.agents.turn.retrieve(turn.turn_id, agent_id=agent.agent_id, session_id=session_id) == turn
