"""The Responses ``mcp`` tool with the real ``openai`` SDK against a real MCP server (the ``mcp`` SDK's).

Its ``mcp_list_tools`` and ``mcp_call`` items and stream events parse; the
listing is made once per conversation or chain; credentials reach the server
and nothing else; a failing tool or an unreachable server is a failed item,
never a failed response.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from hosted_support import sdk, served_locally
from openai.types.responses.response_output_item import McpCall, McpListTools

from ferryman.api.content import ToolDef
from ferryman.testing import ScriptedReply, ScriptedToolCall
from ferryman.tools.mcp import McpEndpoint
from inprocess import Served, check_script
from mcp_servers import RunningServer

MODEL = "scripted-model"
SECRET = "mcp-secret-7c1f"


@pytest.fixture(scope="module")
def local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Ferryman allowed to reach 127.0.0.1, for this module."""
    with served_locally(tmp_path_factory.mktemp("mcp") / "ferryman.db") as server:
        yield server


@pytest.fixture()
def model(local_server: Served, request: pytest.FixtureRequest) -> Iterator[Served]:
    """The scripted model, emptied before each test and checked after it."""
    local_server.reset()
    yield local_server
    check_script(request, local_server.script)


@pytest.fixture()
def oai(model: Served) -> Iterator[openai.OpenAI]:
    """The SDK on the local server."""
    with sdk(model) as client:
        yield client


@pytest.fixture()
def listings(model: Served, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URLs the MCP pool lists tools of, in order (the real listing still runs)."""
    pool = model.services.mcp
    listed: list[str] = []
    real: Callable[[McpEndpoint], Awaitable[list[ToolDef]]] = pool.list_tools

    async def counting(endpoint: McpEndpoint) -> list[ToolDef]:
        listed.append(endpoint.url)
        return await real(endpoint)

    monkeypatch.setattr(pool, "list_tools", counting)
    return listed


def mcp_tool(server: RunningServer, **extra: Any) -> Any:
    """The ``mcp`` tool of the test server."""
    return {"type": "mcp", "server_label": "tests", "server_url": server.url, "require_approval": "never", **extra}


def _offered(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


def test_the_sdk_reads_the_listing_and_the_call(
    oai: openai.OpenAI, model: Served, mcp_http_server: RunningServer
) -> None:
    model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="add", arguments={"a": 2, "b": 3})]),
        ScriptedReply(text="It is 5."),
    )

    response = oai.responses.create(model=MODEL, input="2 + 3?", tools=[mcp_tool(mcp_http_server)])

    listing, call, _ = response.output
    assert isinstance(listing, McpListTools) and listing.server_label == "tests" and listing.error is None
    assert {"add", "echo", "whoami"} <= {tool.name for tool in listing.tools}
    assert isinstance(call, McpCall)
    assert (call.server_label, call.name, json.loads(call.arguments)) == ("tests", "add", {"a": 2, "b": 3})
    assert call.output == "5" and call.error is None and call.status == "completed"
    assert response.output_text == "It is 5."
    first, second = model.requests()
    assert "add" in _offered(first)
    add = next(t for t in first["tools"] if t["function"]["name"] == "add")
    assert add["function"]["parameters"]["required"] == ["a", "b"]
    assert any(m["role"] == "tool" and m["content"] == "5" for m in second["messages"])


def test_the_sdk_streams_the_listing_and_the_call(
    oai: openai.OpenAI, model: Served, mcp_sse_server: RunningServer
) -> None:
    model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="echo", arguments={"text": "ahoy"})]),
        ScriptedReply(text="ahoy"),
    )

    events = list(oai.responses.create(model=MODEL, input="Echo ahoy", tools=[mcp_tool(mcp_sse_server)], stream=True))
    types = [event.type for event in events]

    assert [e.sequence_number for e in events] == list(range(len(events)))
    order = [
        "response.created",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.output_text.delta",
        "response.completed",
    ]
    assert [types.index(kind) for kind in order] == sorted(types.index(kind) for kind in order)
    final = events[-1].response  # type: ignore[union-attr]
    call = final.output[1]
    assert isinstance(call, McpCall) and call.output == "ahoy"


def test_a_conversation_lists_the_tools_once(
    oai: openai.OpenAI, model: Served, mcp_http_server: RunningServer, listings: list[str]
) -> None:
    conversation = oai.conversations.create()
    tool = mcp_tool(mcp_http_server)
    model.enqueue(ScriptedReply(text="Hello."), ScriptedReply(text="Again."))

    first = oai.responses.create(model=MODEL, input="Hi", tools=[tool], conversation=conversation.id)
    second = oai.responses.create(model=MODEL, input="Hi again", tools=[tool], conversation=conversation.id)

    assert [item.type for item in first.output] == ["mcp_list_tools", "message"]
    assert [item.type for item in second.output] == ["message"]
    assert listings == [mcp_http_server.url]
    assert "add" in _offered(model.requests()[1])  # the stored listing still offers the tools


def test_a_chain_of_responses_lists_the_tools_once(
    oai: openai.OpenAI, model: Served, mcp_http_server: RunningServer, listings: list[str]
) -> None:
    tool = mcp_tool(mcp_http_server, allowed_tools=["add"])
    model.enqueue(ScriptedReply(text="One."), ScriptedReply(text="Two."), ScriptedReply(text="Three."))

    first = oai.responses.create(model=MODEL, input="1", tools=[tool])
    second = oai.responses.create(model=MODEL, input="2", tools=[tool], previous_response_id=first.id)
    third = oai.responses.create(model=MODEL, input="3", tools=[tool], previous_response_id=second.id)

    assert [item.type for item in third.output] == ["message"]
    assert listings == [mcp_http_server.url]
    assert all(_offered(request) == ["add"] for request in model.requests())


def test_credentials_reach_the_server_and_are_never_stored_or_echoed(
    oai: openai.OpenAI, model: Served, mcp_http_server: RunningServer
) -> None:
    tool = mcp_tool(mcp_http_server, headers={"X-Test-Token": SECRET}, authorization=SECRET)
    model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="whoami")]), ScriptedReply(text="Known."))
    conversation = oai.conversations.create()

    created = oai.responses.create(model=MODEL, input="Who am I?", tools=[tool], conversation=conversation.id)

    call = created.output[1]
    assert isinstance(call, McpCall) and call.output == SECRET  # the server got the header
    fetched = oai.responses.retrieve(created.id)
    assert fetched.tools[0].headers is None and fetched.tools[0].authorization is None  # type: ignore[union-attr]
    assert SECRET not in created.model_dump_json().replace(call.output, "")
    assert SECRET not in fetched.model_dump_json().replace(call.output, "")
    store = model.services.store

    async def stored() -> str:
        record = await store.get_response(created.id)
        events = await store.events_after(created.id, -1)
        items = await store.all_items(conversation.id)
        return record.response.model_dump_json() + "".join(e.data for e in events) + str(items)

    everything = model.call(stored)
    assert "X-Test-Token" not in everything and f"Bearer {SECRET}" not in everything


def test_a_failing_tool_is_a_failed_call_the_model_sees(
    oai: openai.OpenAI, model: Served, mcp_http_server: RunningServer
) -> None:
    model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="fail")]), ScriptedReply(text="It failed."))

    response = oai.responses.create(model=MODEL, input="Fail", tools=[mcp_tool(mcp_http_server)])

    assert response.status == "completed"
    call = response.output[1]
    assert isinstance(call, McpCall) and call.status == "failed" and call.output is None
    error: Any = call.error
    assert error.type == "mcp_tool_execution_error" and "fail" in error.content[0]["text"]
    tool_message = next(m for m in model.requests()[1]["messages"] if m["role"] == "tool")
    assert tool_message["content"] == "error: " + error.content[0]["text"]


def test_an_unreachable_server_is_a_failed_listing_and_the_response_completes(
    oai: openai.OpenAI, model: Served, tmp_path: Path
) -> None:
    down = {"type": "mcp", "server_label": "down", "server_url": "http://127.0.0.1:9/mcp", "require_approval": "never"}
    model.enqueue(ScriptedReply(text="No tools today."))

    events = list(oai.responses.create(model=MODEL, input="Hi", tools=[down], stream=True))

    final = events[-1].response  # type: ignore[union-attr]
    assert final.status == "completed"
    listing = final.output[0]
    assert isinstance(listing, McpListTools) and listing.error and listing.tools == []
    assert "response.mcp_list_tools.failed" in [event.type for event in events]
    assert _offered(model.requests()[0]) == []


def test_a_name_another_tool_has_is_prefixed_with_the_label(
    oai: openai.OpenAI, model: Served, mcp_http_server: RunningServer
) -> None:
    echo = {"type": "function", "name": "echo", "parameters": {"type": "object", "properties": {}}}
    model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="tests__echo", arguments={"text": "hi"})]),
        ScriptedReply(text="hi"),
    )

    response = oai.responses.create(
        model=MODEL, input="Echo", tools=[echo, mcp_tool(mcp_http_server, allowed_tools=["echo"])]
    )

    assert sorted(_offered(model.requests()[0])) == ["echo", "tests__echo"]
    call = response.output[1]
    assert isinstance(call, McpCall) and call.name == "echo" and call.output == "hi"


def test_two_servers_need_their_own_labels(oai: openai.OpenAI, mcp_http_server: RunningServer) -> None:
    tool = mcp_tool(mcp_http_server)
    with pytest.raises(openai.BadRequestError):
        oai.responses.create(model=MODEL, input="Hi", tools=[tool, tool])
