"""Traces of turns on both APIs: the span tree of a tool-using turn, the caller's trace continued, pauses linked.

Each test serves ferryman in process with an SDK tracer provider collecting spans in memory
(``tracing_support``) and reads the tree the turn left: the HTTP server span continuing the
caller's ``traceparent``, the turn's ``invoke_agent`` span under it, the ``chat`` and
``execute_tool`` spans under that, and the ``traceparent`` the model server received.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from ferryman.server.app import Services, build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply
from ferryman.testing.scripted import ScriptedToolCall
from ferryman.trace_settings import TraceSettings
from inprocess import check_script, migrated_sqlite, scripted_provider, serving
from mcp_servers import LOCAL_FETCH, RunningServer
from support import WEATHER_TOOL
from tracing_support import collected_spans, named, parent_id, span_id, unended_spans

pytestmark = pytest.mark.anyio

CALLER_TRACE = 0x4BF92F3577B34DA6A3CE929D0E0E4736
CALLER_SPAN = 0x00F067AA0BA902B7
TRACEPARENT = f"00-{CALLER_TRACE:032x}-{CALLER_SPAN:016x}-01"
SECRET_WORDS = "the launch code is hunter2"


@dataclass
class Traced:
    http: httpx.AsyncClient
    script: Script
    services: Services
    spans: InMemorySpanExporter

    async def settled(self) -> tuple[ReadableSpan, ...]:
        """The spans ended so far, once no run is live (a run's span ends as its task does)."""
        runner = self.services.runner
        async with asyncio.timeout(15):
            while live := [run for turn_id in runner.running() if (run := runner.run(turn_id))]:
                await asyncio.gather(*(run.settled.wait() for run in live))
        return self.spans.get_finished_spans()


async def _served(tmp_path: Path, request: pytest.FixtureRequest, settings: TraceSettings) -> AsyncIterator[Traced]:
    script = Script()
    services = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "traces.db")),
        [scripted_provider(script)],
        sole_process=True,
        fetch=LOCAL_FETCH,
        tracing=settings,
    )
    with collected_spans() as spans:
        async with serving(services) as http:
            yield Traced(http, script, services, spans)
    check_script(request, script)


@pytest.fixture
async def traced(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Traced]:
    async for served in _served(tmp_path, request, TraceSettings()):
        yield served


@pytest.fixture
async def traced_content(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Traced]:
    async for served in _served(tmp_path, request, TraceSettings(capture_content=True, max_content_chars=4000)):
        yield served


async def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


async def _agent_session(http: httpx.AsyncClient, **config: Any) -> tuple[str, str]:
    body = {"agent_config": {"model": "scripted-model", "instructions": "Be brief.", "name": "calc", **config}}
    agent_id = (await ok(await http.post("/v1/agents", json=body)))["agent_id"]
    session = await ok(await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}))
    return agent_id, session["session_id"]


async def _calculator_turn(served: Traced) -> tuple[str, str, dict[str, Any]]:
    agent_id, session_id = await _agent_session(served.http, toolgroups=["builtin::math"])
    served.script.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="calculator", arguments={"expression": "6 * 7"})]),
        ScriptedReply(text="It is 42."),
    )
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    body = {"messages": [{"role": "user", "content": f"what is 6*7? {SECRET_WORDS}"}], "stream": False}
    turn = await ok(await served.http.post(url, json=body, headers={"traceparent": TRACEPARENT}))
    assert turn["status"] == "completed"
    return agent_id, session_id, turn


def _in_callers_trace(spans: tuple[ReadableSpan, ...]) -> tuple[ReadableSpan, ...]:
    return tuple(s for s in spans if s.context is not None and s.context.trace_id == CALLER_TRACE)


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_tool_using_turn_is_one_trace_continuing_the_callers(traced: Traced) -> None:
    agent_id, session_id, turn = await _calculator_turn(traced)
    spans = _in_callers_trace(await traced.settled())
    assert sorted(s.name.split(" ")[0] for s in spans) == ["POST", "chat", "chat", "execute_tool", "invoke_agent"]

    [server] = named(spans, "POST /v1/agents/")
    assert server.name == "POST /v1/agents/{agent_id}/session/{session_id}/turn"
    assert parent_id(server) == CALLER_SPAN
    assert _attributes(server)["http.response.status_code"] == 200
    assert _attributes(server)["http.route"] == "/v1/agents/{agent_id}/session/{session_id}/turn"

    [agent] = named(spans, "invoke_agent")
    assert agent.name == "invoke_agent calc"
    assert parent_id(agent) == span_id(server)
    assert _attributes(agent) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.id": agent_id,
        "gen_ai.agent.name": "calc",
        "gen_ai.conversation.id": session_id,
        "ferryman.api": "agents",
        "ferryman.turn.id": turn["turn_id"],
        "ferryman.turn.status": "completed",
    }

    first, second = named(spans, "chat")
    for chat in (first, second):
        assert chat.name == "chat scripted-model" and chat.kind is SpanKind.CLIENT
        assert parent_id(chat) == span_id(agent)
        attributes = _attributes(chat)
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == "scripted-model"
        assert attributes["gen_ai.provider.name"] == "remote"
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert "gen_ai.usage.output_tokens" in attributes
        assert "gen_ai.input.messages" not in attributes  # content is the operator's opt-in
    assert _attributes(first)["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert _attributes(second)["gen_ai.response.finish_reasons"] == ("stop",)
    assert _attributes(second)["gen_ai.usage.output_tokens"] == 3  # "It is 42." in the scripted count

    [tool] = named(spans, "execute_tool")
    call = turn["steps"][1]["tool_calls"][0]
    assert tool.name == "execute_tool calculator"
    assert parent_id(tool) == span_id(agent)
    assert _attributes(tool) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "calculator",
        "gen_ai.tool.call.id": call["call_id"],
        "gen_ai.tool.type": "function",
    }
    assert (first.end_time or 0) <= (tool.start_time or 0) <= (tool.end_time or 0) <= (second.start_time or 0)

    # The model server was called in the chat spans' name: its traceparent names each.
    sent = [request["headers"]["traceparent"] for request in traced.script.requests]
    assert sent == [f"00-{CALLER_TRACE:032x}-{span_id(chat):016x}-01" for chat in (first, second)]
    assert all(SECRET_WORDS not in json.dumps(_attributes(s)) for s in spans)


async def test_message_content_is_recorded_when_the_operator_opts_in(traced_content: Traced) -> None:
    await _calculator_turn(traced_content)
    spans = await traced_content.settled()
    first, second = named(spans, "chat")
    said = json.loads(str(_attributes(first)["gen_ai.input.messages"]))
    assert said[0]["role"] == "system"
    assert said[-1] == {"role": "user", "parts": [{"type": "text", "content": f"what is 6*7? {SECRET_WORDS}"}]}
    [answer] = json.loads(str(_attributes(first)["gen_ai.output.messages"]))
    assert answer["finish_reason"] == "tool_calls"
    assert answer["parts"][0]["name"] == "calculator"
    assert json.loads(str(_attributes(second)["gen_ai.output.messages"]))[0]["parts"] == [
        {"type": "text", "content": "It is 42."}
    ]
    [tool] = named(spans, "execute_tool")
    assert json.loads(str(_attributes(tool)["gen_ai.tool.call.arguments"])) == {"expression": "6 * 7"}
    assert _attributes(tool)["gen_ai.tool.call.result"] == "42"


async def test_a_failing_tool_call_has_an_error_type(traced: Traced) -> None:
    agent_id, session_id = await _agent_session(traced.http, toolgroups=["builtin::math"])
    traced.script.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="no_such_tool", arguments={})]),
        ScriptedReply(text="Sorry."),
    )
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    await ok(await traced.http.post(url, json={"messages": [{"role": "user", "content": "go"}], "stream": False}))
    [tool] = named(await traced.settled(), "execute_tool")
    assert _attributes(tool)["error.type"] == "unknown_tool"
    assert tool.status.status_code.name == "ERROR"


async def test_a_paused_turn_and_its_resume_are_linked(traced: Traced) -> None:
    agent_id, session_id = await _agent_session(traced.http, client_tools=[WEATHER_TOOL])
    traced.script.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Rome"})]))
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
    body = {"messages": [{"role": "user", "content": "weather?"}], "stream": False}
    paused = await ok(await traced.http.post(url, json=body))
    assert paused["status"] == "awaiting_input"
    [call] = paused["output_message"]["tool_calls"]
    traced.script.enqueue(ScriptedReply(text="Sunny."))
    answer = {"call_id": call["call_id"], "tool_name": "get_weather", "content": "sunny"}
    resume = {"tool_responses": [answer], "stream": False}
    resumed = await ok(
        await traced.http.post(f"{url}/{paused['turn_id']}/resume", json=resume, headers={"traceparent": TRACEPARENT})
    )
    assert resumed["status"] == "completed"
    first, second = named(await traced.settled(), "invoke_agent")
    assert _attributes(first)["ferryman.turn.status"] == "awaiting_input"
    assert _attributes(second)["ferryman.turn.id"] == paused["turn_id"]
    assert second.context is not None and second.context.trace_id == CALLER_TRACE  # the resuming call's trace
    [link] = second.links
    assert first.context is not None
    assert (link.context.trace_id, link.context.span_id) == (first.context.trace_id, first.context.span_id)


async def _response(http: httpx.AsyncClient, headers: dict[str, str] | None = None, **body: Any) -> dict[str, Any]:
    return await ok(await http.post("/v1/responses", json={"model": "scripted-model", **body}, headers=headers))


async def test_a_response_with_an_mcp_call_is_one_trace(traced: Traced, mcp_http_server: RunningServer) -> None:
    tool = {"type": "mcp", "server_label": "test", "server_url": mcp_http_server.url, "require_approval": "never"}
    traced.script.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="add", arguments={"a": 2, "b": 3})]),
        ScriptedReply(text="5."),
    )
    response = await _response(traced.http, {"traceparent": TRACEPARENT}, input="add 2 and 3", tools=[tool])
    assert response["status"] == "completed", response
    spans = await traced.settled()
    [server] = named(spans, "POST /v1/responses")
    assert parent_id(server) == CALLER_SPAN
    [agent] = named(spans, "invoke_agent")
    assert parent_id(agent) == span_id(server)
    attributes = _attributes(agent)
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.response.id"] == response["id"]
    assert attributes["ferryman.api"] == "responses"
    assert attributes["gen_ai.conversation.id"]
    assert [parent_id(chat) for chat in named(spans, "chat")] == [span_id(agent)] * 2
    [call] = named(spans, "execute_tool")
    assert call.name == "execute_tool add"
    assert parent_id(call) == span_id(agent)
    # The MCP SDK's client span, under the tool call: it carries the trace to the server (in the request's _meta).
    [mcp] = [s for s in spans if s.name == "MCP send tools/call add"]
    assert parent_id(mcp) == span_id(call)
    assert _in_callers_trace(spans) == spans[-len(_in_callers_trace(spans)) :]  # nothing else ran meanwhile


async def test_a_response_answering_a_paused_ones_calls_links_to_it(traced: Traced) -> None:
    function = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    traced.script.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", arguments={})]))
    first = await _response(traced.http, input="weather?", tools=[function])
    [call] = [item for item in first["output"] if item["type"] == "function_call"]
    traced.script.enqueue(ScriptedReply(text="Sunny."))
    answer = {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}
    await _response(traced.http, input=[answer], tools=[function], previous_response_id=first["id"])
    paused, resumed = named(await traced.settled(), "invoke_agent")
    assert _attributes(paused)["gen_ai.response.id"] == first["id"]
    [link] = resumed.links
    assert paused.context is not None
    assert (link.context.trace_id, link.context.span_id) == (paused.context.trace_id, paused.context.span_id)


async def test_a_turn_refused_before_it_runs_ends_its_span(traced: Traced) -> None:
    agent_id, _ = await _agent_session(traced.http)
    url = f"/v1/agents/{agent_id}/session/no-such-session/turn"
    refused = await traced.http.post(url, json={"messages": [{"role": "user", "content": "hi"}], "stream": False})
    assert refused.status_code == 404, refused.text
    spans = await traced.settled()
    assert unended_spans() == []
    [agent] = named(spans, "invoke_agent")
    assert _attributes(agent)["error.type"] == "not_found" and agent.status.status_code.name == "ERROR"


async def test_a_response_refused_by_its_locked_conversation_ends_its_span(traced: Traced) -> None:
    conversation = (await traced.http.post("/v1/conversations", json={})).json()["id"]
    traced.script.enqueue(ScriptedReply(text="first", gate="go"))
    body = {"model": "scripted-model", "input": "one", "conversation": conversation, "background": True}
    first = await ok(await traced.http.post("/v1/responses", json=body))
    locked = await traced.http.post("/v1/responses", json={**body, "input": "two", "background": False})
    assert locked.status_code == 409, locked.text
    traced.script.open_gate("go")
    spans = await traced.settled()
    assert unended_spans() == []
    paused, refused = named(spans, "invoke_agent")
    assert _attributes(paused)["gen_ai.response.id"] == first["id"]
    assert _attributes(refused)["error.type"] == "conversation_locked"
