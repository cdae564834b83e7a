"""An MCP server that is down when a turn starts degrades the turn: it runs without that group's tools and says so.

The client sees a ``tool_execution`` step naming the toolgroup and the error (streamed and in ``GET turn``),
the model reads the same in its system message, the other groups' tools are still offered, and the Responses
API tells its model alike beside its failed ``mcp_list_tools`` item. Routes that list the group alone fail
with a 502 naming it; listing every group leaves it out.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply
from ferryman.testing.scripted import ScriptedToolCall
from inprocess import check_script, migrated_sqlite, scripted_provider, serving
from mcp_servers import LOCAL_FETCH, RunningServer
from sse import aframes
from support import WEATHER_TOOL

pytestmark = pytest.mark.anyio

SECRET = "tok-5e1f"
DOWN = "mcp::down"


@dataclass
class Server:
    http: httpx.AsyncClient
    script: Script
    down_url: str
    """A registered-looking URL of a port nothing listens on, with credentials in its user info and query."""


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
async def server(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Server]:
    script = Script()
    services = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "unlisted.db")),
        [scripted_provider(script)],
        sole_process=True,
        fetch=LOCAL_FETCH,
    )
    down_url = f"http://user:{SECRET}@127.0.0.1:{_closed_port()}/mcp?token={SECRET}"
    async with serving(services) as http:
        yield Server(http, script, down_url)
    check_script(request, script)


async def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


async def register(http: httpx.AsyncClient, group_id: str, uri: str) -> None:
    body = {"toolgroup_id": group_id, "provider_id": "model-context-protocol", "mcp_endpoint": {"uri": uri}}
    await ok(await http.post("/v1/toolgroups", json=body))


async def agent_session(http: httpx.AsyncClient, toolgroups: list[str], **extra: Any) -> str:
    config = {"model": "scripted-model", "instructions": "Be brief.", "toolgroups": toolgroups, **extra}
    agent_id = (await ok(await http.post("/v1/agents", json={"agent_config": config})))["agent_id"]
    session_id = (await ok(await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})))["session_id"]
    return f"/v1/agents/{agent_id}/session/{session_id}"


def system_text(request: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in request["messages"] if m["role"] == "system")


def offered(request: dict[str, Any]) -> list[str]:
    return sorted(tool["function"]["name"] for tool in request.get("tools") or [])


def check_unlisted_step(step: dict[str, Any]) -> None:
    """The step that says the group's tools could not be listed, and why, without the URL's credentials."""
    assert step["step_type"] == "tool_execution"
    [call] = step["tool_calls"]
    [response] = step["tool_responses"]
    assert (call["tool_name"], call["arguments"]) == ("list_tools", {"toolgroup_id": DOWN})
    assert response["call_id"] == call["call_id"] and response["tool_name"] == "list_tools"
    assert response["content"].startswith(f"error: the tools of '{DOWN}' could not be listed: ")
    assert "could not connect to the MCP server http://127.0.0.1:" in response["content"]
    assert response["metadata"] == {"error": True, "toolgroup_id": DOWN}
    assert SECRET not in json.dumps(step)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_turn_runs_without_a_group_whose_server_is_down_and_says_so(server: Server, stream: bool) -> None:
    http = server.http
    await register(http, DOWN, server.down_url)
    path = await agent_session(http, ["builtin::math", DOWN])
    server.script.enqueue(ScriptedReply(text="The down tools are unavailable."))

    body = {"messages": [{"role": "user", "content": "hi"}], "stream": stream}
    if stream:
        async with http.stream("POST", f"{path}/turn", json=body) as answer:
            assert answer.status_code == 200
            events = [frame.json() async for frame in aframes(answer)]
        payloads = [event["event"]["payload"] for event in events]
        assert [(p["event_type"], p.get("step_type")) for p in payloads[:3]] == [
            ("turn_start", None),
            ("step_start", "tool_execution"),
            ("step_complete", "tool_execution"),
        ]
        assert payloads[1]["metadata"] == {"unlisted_toolgroups": [DOWN]}
        check_unlisted_step(payloads[2]["step_details"])
        turn = payloads[-1]["turn"]
        assert payloads[-1]["event_type"] == "turn_complete"
    else:
        turn = await ok(await http.post(f"{path}/turn", json=body))

    assert turn["status"] == "completed"
    assert turn["output_message"]["content"] == "The down tools are unavailable."
    assert [step["step_type"] for step in turn["steps"]] == ["tool_execution", "inference"]
    check_unlisted_step(turn["steps"][0])
    stored = await ok(await http.get(f"{path}/turn/{turn['turn_id']}"))
    assert stored["steps"] == turn["steps"]

    [request] = server.script.requests
    assert offered(request) == ["calculator"]
    system = system_text(request)
    assert system.startswith("Be brief.\n\nSome tools are unavailable in this turn")
    assert turn["steps"][0]["tool_responses"][0]["content"].removeprefix("error: ") in system
    assert SECRET not in json.dumps(request)
    # The note is this turn's: the history a later turn reads holds no trace of the step.
    assert [m["role"] for m in request["messages"]] == ["system", "user"]


async def test_the_working_groups_tools_are_offered_and_run(server: Server, mcp_http_server: RunningServer) -> None:
    http = server.http
    await register(http, "mcp::up", mcp_http_server.url)
    await register(http, DOWN, server.down_url)
    path = await agent_session(http, [DOWN, "mcp::up"])
    server.script.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="add", arguments={"a": 2, "b": 40})]), ScriptedReply(text="42")
    )

    turn = await ok(await http.post(f"{path}/turn", json={"messages": [{"role": "user", "content": "2+40?"}]}))

    assert turn["status"] == "completed"
    assert [step["step_type"] for step in turn["steps"]] == [
        "tool_execution",
        "inference",
        "tool_execution",
        "inference",
    ]
    check_unlisted_step(turn["steps"][0])
    assert turn["steps"][2]["tool_responses"][0]["content"] == [{"type": "text", "text": "42"}]
    first, second = server.script.requests
    assert {"add", "echo", "whoami"} <= set(offered(first))
    assert f"'{DOWN}'" in system_text(first) and "'mcp::up'" not in system_text(first)
    # Each inference of the run reads the note (the listing is the run's); the step is not history.
    assert f"'{DOWN}'" in system_text(second)
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]


async def test_a_resumed_turn_lists_its_tools_anew_and_says_so_again(server: Server) -> None:
    http = server.http
    await register(http, DOWN, server.down_url)
    path = await agent_session(http, [DOWN], client_tools=[WEATHER_TOOL])
    server.script.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"})]),
        ScriptedReply(text="Sunny."),
    )
    paused = await ok(await http.post(f"{path}/turn", json={"messages": [{"role": "user", "content": "weather?"}]}))
    assert paused["status"] == "awaiting_input"
    call = paused["output_message"]["tool_calls"][0]

    answer = {"call_id": call["call_id"], "tool_name": "get_weather", "content": "sunny"}
    body = {"tool_responses": [answer], "stream": False}
    turn = await ok(await http.post(f"{path}/turn/{paused['turn_id']}/resume", json=body))

    assert turn["status"] == "completed"
    kinds = [step["step_type"] for step in turn["steps"]]
    assert kinds == ["tool_execution", "inference", "tool_execution", "tool_execution", "inference"]
    check_unlisted_step(turn["steps"][0])
    assert turn["steps"][2]["tool_responses"][0]["content"] == "sunny"
    check_unlisted_step(turn["steps"][3])
    assert all(f"'{DOWN}'" in system_text(request) for request in server.script.requests)


async def test_an_error_that_quotes_the_url_does_not_show_its_credentials(
    server: Server, mcp_http_server: RunningServer
) -> None:
    """The server answers 404: the HTTP error quotes the URL it requested, query and all."""
    http = server.http
    wrong = mcp_http_server.url.replace("/mcp", f"/nowhere?token={SECRET}")
    await register(http, DOWN, wrong)
    path = await agent_session(http, [DOWN])
    server.script.enqueue(ScriptedReply(text="Unavailable."))

    turn = await ok(await http.post(f"{path}/turn", json={"messages": [{"role": "user", "content": "hi"}]}))

    [response] = turn["steps"][0]["tool_responses"]
    assert "404" in response["content"] and "/nowhere" in response["content"]
    assert SECRET not in json.dumps(turn) and SECRET not in json.dumps(server.script.requests)


async def test_listing_the_down_group_alone_is_a_502_naming_it_and_listing_all_leaves_it_out(server: Server) -> None:
    http = server.http
    await register(http, DOWN, server.down_url)

    for route, params in [
        ("/v1/tools", {"toolgroup_id": DOWN}),
        ("/v1/tool-runtime/list-tools", {"tool_group_id": DOWN}),
    ]:
        answer = await http.get(route, params=params)
        assert answer.status_code == 502, answer.text
        error = answer.json()["error"]
        assert error["code"] == "upstream_error" and error["toolgroup_id"] == DOWN
        assert error["message"].startswith(f"the tools of toolgroup '{DOWN}' could not be listed: ")
        assert SECRET not in answer.text

    every = await ok(await http.get("/v1/tools"))
    groups = {tool["toolgroup_id"] for tool in every["data"]}
    assert "builtin::math" in groups and DOWN not in groups


async def test_a_responses_mcp_server_that_is_down_is_a_failed_listing_the_model_is_told_of(server: Server) -> None:
    http = server.http
    down = {"type": "mcp", "server_label": "down", "server_url": server.down_url, "require_approval": "never"}
    server.script.enqueue(ScriptedReply(text="No tools today."))

    response = await ok(
        await http.post("/v1/responses", json={"model": "scripted-model", "input": "hi", "tools": [down]})
    )

    assert response["status"] == "completed"
    listing, message = response["output"]
    assert (listing["type"], listing["server_label"], listing["tools"]) == ("mcp_list_tools", "down", [])
    assert listing["error"].startswith("could not connect to the MCP server http://127.0.0.1:")
    assert message["type"] == "message"
    [request] = server.script.requests
    assert offered(request) == []
    assert f"the tools of 'down' could not be listed: {listing['error']}" in system_text(request)
    assert SECRET not in json.dumps(listing) and SECRET not in json.dumps(request)
