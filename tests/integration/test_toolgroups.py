"""Toolgroups over HTTP: registrations, the tool routes, the tool runtime, and tool steps (context, timing, limits)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ferryman.api.content import ToolParameter
from ferryman.api.registry import Tool, ToolInvocationResult
from ferryman.inference.provider_data import HEADER
from ferryman.safe_fetch import FetchPolicy
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply
from ferryman.testing.scripted import ScriptedToolCall
from ferryman.tools.calculator import Calculator
from ferryman.tools.context import tool_context
from ferryman.tools.registry import ToolRegistry
from inprocess import check_script, migrated_sqlite, scripted_provider, serving
from mcp_servers import RunningServer

pytestmark = pytest.mark.anyio


class Loud:
    """A test tool whose output is ``size`` characters long."""

    definition = Tool(
        identifier="loud",
        toolgroup_id="test::tools",
        description="Says a lot",
        parameters=[ToolParameter(name="size", parameter_type="integer")],
    )

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        return ToolInvocationResult(content="x" * int(arguments["size"]))


class WhereAmI:
    """A test tool answering with the tool context it runs in."""

    definition = Tool(identifier="where_am_i", toolgroup_id="test::tools", description="Context", parameters=[])

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        context = tool_context.get()
        seen = {"session_id": context.session_id, "turn_id": context.turn_id, "key": context.provider_data.get("k")}
        return ToolInvocationResult(content=json.dumps(seen))


@dataclass
class Server:
    http: httpx.AsyncClient
    script: Script


@pytest.fixture
async def server(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Server]:
    script = Script()
    tools = ToolRegistry(max_output_chars=200)
    tools.register("builtin::math", [Calculator()])
    tools.register("test::tools", [Loud(), WhereAmI()])
    services = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "tools.db")),
        [scripted_provider(script)],
        tools=tools,
        sole_process=True,
        fetch=FetchPolicy(allowed_hosts=["127.0.0.1"]),
    )
    async with serving(services) as http:
        yield Server(http, script)
    check_script(request, script)


async def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json() if response.content else None


async def agent_turn(http: httpx.AsyncClient, toolgroups: list[Any], text: str = "go", **extra: Any) -> httpx.Response:
    config = {"model": "scripted-model", "instructions": "x", "toolgroups": toolgroups}
    agent_id = (await ok(await http.post("/v1/agents", json={"agent_config": config})))["agent_id"]
    session = await ok(await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}))
    body = {"messages": [{"role": "user", "content": text}], "stream": False}
    return await http.post(f"/v1/agents/{agent_id}/session/{session['session_id']}/turn", json=body, **extra)


# ---- registrations -------------------------------------------------------------


async def test_a_registered_group_lists_gets_and_unregisters(server: Server) -> None:
    http = server.http
    body = {"toolgroup_id": "my-math", "provider_id": "builtin::math", "args": {"note": 1}}
    registered = await ok(await http.post("/v1/toolgroups", json=body))
    assert registered == {
        "identifier": "my-math",
        "provider_id": "builtin::math",
        "provider_resource_id": "my-math",
        "type": "tool_group",
        "args": {"note": 1},
        "mcp_endpoint": None,
    }
    listed = await ok(await http.get("/v1/toolgroups"))
    assert [g["identifier"] for g in listed["data"]] == ["builtin::math", "test::tools", "my-math"]
    assert await ok(await http.get("/v1/toolgroups/my-math")) == registered
    tools = await ok(await http.get("/v1/tools", params={"toolgroup_id": "my-math"}))
    assert [(t["identifier"], t["toolgroup_id"]) for t in tools["data"]] == [("calculator", "my-math")]

    await ok(await http.delete("/v1/toolgroups/my-math"))
    assert (await http.get("/v1/toolgroups/my-math")).status_code == 404
    assert (await http.delete("/v1/toolgroups/my-math")).status_code == 404
    assert (await http.get("/v1/tools", params={"toolgroup_id": "my-math"})).status_code == 404


async def test_registering_again_is_idempotent_only_with_the_same_settings(server: Server) -> None:
    http = server.http
    body = {"toolgroup_id": "g", "provider_id": "builtin::math"}
    first = await ok(await http.post("/v1/toolgroups", json=body))
    assert await ok(await http.post("/v1/toolgroups", json=body)) == first
    other = await http.post("/v1/toolgroups", json={**body, "args": {"x": 1}})
    assert other.status_code == 409, other.text
    assert (await ok(await http.get("/v1/toolgroups/g")))["args"] is None


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"toolgroup_id": "builtin::math", "provider_id": "builtin::math"}, 409, None),
        ({"toolgroup_id": "g", "provider_id": "nope"}, 400, "provider_id"),
        ({"toolgroup_id": "g", "provider_id": "model-context-protocol"}, 400, "mcp_endpoint"),
        (
            {"toolgroup_id": "g", "provider_id": "model-context-protocol", "mcp_endpoint": {"uri": "ftp://x/y"}},
            400,
            "mcp_endpoint.uri",
        ),
        ({"toolgroup_id": "g", "provider_id": "builtin::math", "mcp_endpoint": {"uri": "http://x"}}, 400, None),
        ({"provider_id": "builtin::math"}, 400, None),
    ],
)
async def test_bad_registrations_are_refused(server: Server, body: dict[str, Any], status: int, field: str) -> None:
    answer = await server.http.post("/v1/toolgroups", json=body)
    assert answer.status_code == status, answer.text
    if field is not None:
        assert answer.json()["error"]["field"] == field
    assert [g["identifier"] for g in (await ok(await server.http.get("/v1/toolgroups")))["data"]] == [
        "builtin::math",
        "test::tools",
    ]


async def test_a_builtin_group_cannot_be_unregistered(server: Server) -> None:
    answer = await server.http.delete("/v1/toolgroups/builtin::math")
    assert answer.status_code == 400, answer.text
    assert (await ok(await server.http.get("/v1/toolgroups/builtin::math")))["identifier"] == "builtin::math"


# ---- tools and the tool runtime --------------------------------------------------


async def test_tools_list_get_and_runtime_listing(server: Server) -> None:
    http = server.http
    await ok(await http.post("/v1/toolgroups", json={"toolgroup_id": "m", "provider_id": "builtin::math"}))
    every = await ok(await http.get("/v1/tools"))
    assert [(t["identifier"], t["toolgroup_id"]) for t in every["data"]] == [
        ("calculator", "builtin::math"),
        ("loud", "test::tools"),
        ("where_am_i", "test::tools"),
        ("calculator", "m"),
    ]
    assert (await ok(await http.get("/v1/tools/loud")))["toolgroup_id"] == "test::tools"
    assert (await http.get("/v1/tools/nope")).status_code == 404
    defs = await ok(await http.get("/v1/tool-runtime/list-tools", params={"tool_group_id": "m"}))
    assert [d["name"] for d in defs["data"]] == ["calculator"]
    assert defs["data"][0]["parameters"][0]["name"] == "expression"
    assert (await http.get("/v1/tool-runtime/list-tools")).status_code == 400
    assert (await http.get("/v1/tool-runtime/list-tools", params={"tool_group_id": "nope"})).status_code == 404


async def test_invoke_runs_a_tool_in_the_request_context(server: Server) -> None:
    http = server.http
    result = await ok(
        await http.post("/v1/tool-runtime/invoke", json={"tool_name": "calculator", "kwargs": {"expression": "6*7"}})
    )
    assert result["content"] == "42"
    headers = {HEADER: json.dumps({"k": "v"})}
    answer = await http.post("/v1/tool-runtime/invoke", json={"tool_name": "where_am_i", "kwargs": {}}, headers=headers)
    assert json.loads((await ok(answer))["content"]) == {"session_id": None, "turn_id": None, "key": "v"}


# ---- agents using registered groups ------------------------------------------------


async def test_an_agent_uses_a_registered_group_and_a_deleted_one_fails_its_next_turn(server: Server) -> None:
    http = server.http
    await ok(await http.post("/v1/toolgroups", json={"toolgroup_id": "m", "provider_id": "builtin::math"}))
    server.script.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="calculator", arguments={"expression": "2+3"})]),
        ScriptedReply(text="5"),
    )
    config = {"model": "scripted-model", "instructions": "x", "toolgroups": ["m"]}
    agent_id = (await ok(await http.post("/v1/agents", json={"agent_config": config})))["agent_id"]
    session = (await ok(await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})))["session_id"]
    url = f"/v1/agents/{agent_id}/session/{session}/turn"
    body = {"messages": [{"role": "user", "content": "2+3?"}], "stream": False}
    turn = await ok(await http.post(url, json=body))
    assert turn["steps"][1]["tool_responses"][0]["content"] == "5"
    assert [t["function"]["name"] for t in server.script.requests[0]["tools"]] == ["calculator"]

    await ok(await http.delete("/v1/toolgroups/m"))
    refused = await http.post(url, json=body)
    assert refused.status_code == 400, refused.text
    assert "'m'" in refused.json()["error"]["message"]
    assert refused.json()["error"]["field"] == "toolgroups"


async def test_an_agent_naming_an_unknown_group_is_refused_at_creation(server: Server) -> None:
    config = {"model": "scripted-model", "instructions": "x", "toolgroups": ["ghost"]}
    answer = await server.http.post("/v1/agents", json={"agent_config": config})
    assert answer.status_code == 400, answer.text


# ---- the tool step: context, timing, output limit -----------------------------------


async def test_each_call_is_timed_and_long_output_is_truncated_with_a_note(server: Server) -> None:
    server.script.enqueue(
        ScriptedReply(
            tool_calls=[
                ScriptedToolCall(name="loud", arguments={"size": 500}),
                ScriptedToolCall(name="loud", arguments={"size": 10}),
            ]
        ),
        ScriptedReply(text="done"),
    )
    turn = await ok(await agent_turn(server.http, ["test::tools"]))
    step = turn["steps"][1]
    assert step["step_type"] == "tool_execution"
    assert step["started_at"] <= step["completed_at"]
    long, short = step["tool_responses"]
    note = "[output truncated: 200 of 500 characters shown]"
    assert long["content"] == "x" * 200 + "\n" + note
    assert long["metadata"]["truncated"] is True
    assert short["content"] == "x" * 10 and "truncated" not in short["metadata"]
    assert all(r["metadata"]["duration_ms"] >= 0 for r in (long, short))
    seen = [m["content"] for m in server.script.requests[1]["messages"] if m["role"] == "tool"]
    assert seen[0].endswith(note)


async def test_a_tool_sees_its_session_turn_and_provider_data(server: Server) -> None:
    server.script.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="where_am_i", arguments={})]), ScriptedReply(text="here")
    )
    answer = await agent_turn(server.http, ["test::tools"], headers={HEADER: json.dumps({"k": "secret"})})
    turn = await ok(answer)
    seen = json.loads(turn["steps"][1]["tool_responses"][0]["content"])
    assert seen == {"session_id": turn["session_id"], "turn_id": turn["turn_id"], "key": "secret"}


# ---- MCP toolgroups ----------------------------------------------------------------


async def test_an_mcp_group_lists_invokes_with_request_credentials_and_serves_a_turn(
    server: Server, mcp_http_server: RunningServer
) -> None:
    http = server.http
    uri = mcp_http_server.url
    body = {"toolgroup_id": "mcp::test", "provider_id": "model-context-protocol", "mcp_endpoint": {"uri": uri}}
    await ok(await http.post("/v1/toolgroups", json=body))
    tools = await ok(await http.get("/v1/tools", params={"toolgroup_id": "mcp::test"}))
    names = {t["identifier"] for t in tools["data"]}
    assert {"add", "echo", "whoami"} <= names
    assert {t["provider_id"] for t in tools["data"]} == {"model-context-protocol"}
    direct = await ok(await http.get("/v1/tool-runtime/list-tools", params={"mcp_endpoint[uri]": uri}))
    assert {d["name"] for d in direct["data"]} == names

    creds = {HEADER: json.dumps({"mcp_headers": {uri: {"X-Test-Token": "tok-123"}}})}
    whoami = {"tool_name": "whoami", "kwargs": {}}
    result = await ok(await http.post("/v1/tool-runtime/invoke", json=whoami, headers=creds))
    assert "tok-123" in json.dumps(result["content"])

    server.script.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="add", arguments={"a": 2, "b": 40})]), ScriptedReply(text="42")
    )
    turn = await ok(await agent_turn(http, ["mcp::test/add"]))
    assert [t["function"]["name"] for t in server.script.requests[0]["tools"]] == ["add"]
    assert "42" in json.dumps(turn["steps"][1]["tool_responses"][0]["content"])
