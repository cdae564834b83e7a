"""``builtin::websearch``: each provider through its local stand-in, keys, failures, and an agent turn."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from ferryman.api.registry import ToolInvocationResult
from ferryman.inference.provider_data import HEADER
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply
from ferryman.testing.scripted import ScriptedToolCall
from ferryman.tools.context import ToolContext, tool_context
from ferryman.tools.websearch import WebSearch, providers
from ferryman.websearch_settings import WebSearchSettings
from inprocess import check_script, migrated_sqlite, scripted_provider, serving
from websearch_standins import BRAVE_KEY, TAVILY_KEY, StandIn, search_standin

pytestmark = pytest.mark.anyio

KEYS = {"brave": BRAVE_KEY, "tavily": TAVILY_KEY, "searxng": None}


@pytest.fixture(scope="module")
def running_standin() -> Iterator[StandIn]:
    with search_standin() as standin:
        yield standin


@pytest.fixture
def standin(running_standin: StandIn) -> StandIn:
    running_standin.seen.clear()
    return running_standin


@asynccontextmanager
async def web_search(standin: StandIn, **settings: Any) -> AsyncIterator[WebSearch]:
    settings.setdefault("base_url", standin.url)
    tool = WebSearch(WebSearchSettings.model_validate(settings))
    try:
        yield tool
    finally:
        await tool.close()


async def search(
    tool: WebSearch, provider_data: dict[str, Any] | None = None, **arguments: Any
) -> ToolInvocationResult:
    token = tool_context.set(ToolContext(provider_data=provider_data or {}))
    try:
        return await tool.invoke(arguments)
    finally:
        tool_context.reset(token)


@pytest.mark.parametrize("provider", ["brave", "tavily", "searxng"])
async def test_each_provider_answers_through_its_api(standin: StandIn, provider: str) -> None:
    async with web_search(standin, provider=provider, api_key=KEYS[provider], max_results=3) as tool:
        result = await search(tool, query="  ferries  ")
    assert result.error_message is None
    assert result.metadata is not None
    assert result.metadata["query"] == "ferries"
    assert result.metadata["provider"] == provider
    assert result.metadata["results"] == [
        {
            "title": f"{provider} hit {n} for ferries",
            "url": f"https://{provider}.example/{n}",
            "snippet": f"snippet {n}",
        }
        if provider != "brave"
        else {
            "title": f"brave hit {n} for ferries",
            "url": f"https://brave.example/{n}",
            "snippet": f"snippet {n} & more",
        }
        for n in (1, 2, 3)
    ]
    assert isinstance(result.content, str)
    assert f"[1] {provider} hit 1 for ferries\nURL: https://{provider}.example/1" in result.content
    assert "[3]" in result.content and "[4]" not in result.content
    assert standin.seen[-1]["query"] == "ferries"
    assert standin.seen[-1]["key"] == KEYS[provider]


async def test_a_bound_max_results_is_sent_and_a_bad_one_refused(standin: StandIn) -> None:
    async with web_search(standin, provider="tavily", api_key=TAVILY_KEY) as tool:
        result = await search(tool, query="q", max_results=7)
        assert result.metadata is not None and len(result.metadata["results"]) == 7
        assert standin.seen[-1]["count"] == 7
        refused = await search(tool, query="q", max_results=50)
        assert refused.error_message is not None and "max_results" in refused.error_message
        empty = await search(tool, query="   ")
        assert empty.error_message == "web_search needs a non-empty 'query' string"
    assert len(standin.seen) == 1


@pytest.mark.parametrize("provider", ["brave", "tavily"])
async def test_the_requests_key_wins_over_the_configured_one(standin: StandIn, provider: str) -> None:
    field = f"{provider}_search_api_key"
    async with web_search(standin, provider=provider, api_key="configured-but-wrong") as tool:
        result = await search(tool, {field: KEYS[provider]}, query="q")
        assert result.error_message is None
        assert standin.seen[-1]["key"] == KEYS[provider]
        refused = await search(tool, query="q")
        assert standin.seen[-1]["key"] == "configured-but-wrong"
    assert refused.error_message is not None
    assert refused.error_message.startswith("the search provider refused the API key")


async def test_a_refused_key_is_never_echoed_nor_logged(standin: StandIn, caplog: pytest.LogCaptureFixture) -> None:
    secret = "sk-very-secret-value"
    caplog.set_level(logging.DEBUG)
    async with web_search(standin, provider="brave") as tool:
        result = await search(tool, {"brave_search_api_key": secret}, query="q")
    assert standin.seen[-1]["key"] == secret
    assert result.error_message == "the search provider refused the API key (Brave Search, HTTP 401)"
    assert secret not in result.model_dump_json()
    assert caplog.records and all(secret not in r.getMessage() for r in caplog.records)
    assert "sk-very" not in repr(WebSearchSettings(provider="brave", api_key=secret))


@pytest.mark.parametrize("provider", ["brave", "tavily"])
async def test_a_provider_needing_a_key_without_one_says_how_to_give_it(standin: StandIn, provider: str) -> None:
    async with web_search(standin, provider=provider) as tool:
        result = await search(tool, query="q")
    assert result.error_message is not None
    assert "websearch.api_key" in result.error_message and f"{provider}_search_api_key" in result.error_message
    assert standin.seen == []


async def test_unconfigured_search_uses_the_provider_the_request_brings_a_key_for(
    standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(providers, "TAVILY_URL", standin.url)
    async with web_search(standin, base_url=None) as tool:
        missing = await search(tool, query="q")
        found = await search(tool, {"tavily_search_api_key": TAVILY_KEY}, query="q")
    assert missing.error_message is not None and "not configured" in missing.error_message
    assert found.error_message is None and found.metadata is not None
    assert found.metadata["provider"] == "tavily"
    assert [s["provider"] for s in standin.seen] == ["tavily"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("boom", "Brave Search answered HTTP 500"),
        ("busy", "Brave Search is rate limiting this server's searches; try again later"),
        ("garbage", "Brave Search answered something other than JSON"),
        ("slow", "Brave Search did not answer within 0.2 s"),
    ],
)
async def test_provider_failures_are_error_results(standin: StandIn, query: str, message: str) -> None:
    async with web_search(standin, provider="brave", api_key=BRAVE_KEY, timeout_seconds=0.2) as tool:
        result = await search(tool, query=query)
    assert result.error_message == message
    assert result.content is None


async def test_an_unreachable_provider_is_an_error_result() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    tool = WebSearch(WebSearchSettings(provider="searxng", base_url=closed))
    try:
        result = await search(tool, query="q")
    finally:
        await tool.close()
    assert result.error_message == "SearXNG could not be reached (ConnectError)"


# ---- served -------------------------------------------------------------------------


@asynccontextmanager
async def served(
    tmp_path: Path, request: pytest.FixtureRequest, settings: WebSearchSettings
) -> AsyncIterator[tuple[httpx.AsyncClient, Script]]:
    script = Script()
    services = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "websearch.db")),
        [scripted_provider(script)],
        sole_process=True,
        websearch=settings,
    )
    async with serving(services) as http:
        yield http, script
    check_script(request, script)


async def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


async def test_an_agent_turn_searches_the_web_with_the_requests_key(
    standin: StandIn, tmp_path: Path, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    settings = WebSearchSettings(provider="brave", base_url=standin.url, max_results=2)
    async with served(tmp_path, request, settings) as (http, script):
        listed = await ok(await http.get("/v1/tools", params={"toolgroup_id": "builtin::websearch"}))
        assert [(t["identifier"], [p["name"] for p in t["parameters"]]) for t in listed["data"]] == [
            ("web_search", ["query"])
        ]
        script.enqueue(
            ScriptedReply(tool_calls=[ScriptedToolCall(name="web_search", arguments={"query": "ferry times"})]),
            ScriptedReply(text="Ferries leave hourly."),
        )
        config = {"model": "scripted-model", "instructions": "x", "toolgroups": ["builtin::websearch"]}
        agent_id = (await ok(await http.post("/v1/agents", json={"agent_config": config})))["agent_id"]
        session = await ok(await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}))
        body = {"messages": [{"role": "user", "content": "When do ferries leave?"}], "stream": False}
        headers = {HEADER: json.dumps({"brave_search_api_key": BRAVE_KEY})}
        url = f"/v1/agents/{agent_id}/session/{session['session_id']}/turn"
        turn = await ok(await http.post(url, json=body, headers=headers))
    assert [t["function"]["name"] for t in script.requests[0]["tools"]] == ["web_search"]
    step = turn["steps"][1]
    assert step["step_type"] == "tool_execution"
    response = step["tool_responses"][0]
    assert response["tool_name"] == "web_search"
    assert "URL: https://brave.example/1" in response["content"]
    assert [r["url"] for r in response["metadata"]["results"]] == ["https://brave.example/1", "https://brave.example/2"]
    assert turn["output_message"]["content"] == "Ferries leave hourly."
    assert standin.seen == [{"provider": "brave", "key": BRAVE_KEY, "query": "ferry times", "count": 2}]
    assert BRAVE_KEY not in json.dumps(turn)
    assert all(BRAVE_KEY not in r.getMessage() for r in caplog.records)


async def test_a_turn_without_a_configured_provider_tells_the_model(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    async with served(tmp_path, request, WebSearchSettings()) as (http, script):
        script.enqueue(
            ScriptedReply(tool_calls=[ScriptedToolCall(name="web_search", arguments={"query": "q"})]),
            ScriptedReply(text="I cannot search."),
        )
        config = {"model": "scripted-model", "instructions": "x", "toolgroups": ["builtin::websearch"]}
        agent_id = (await ok(await http.post("/v1/agents", json={"agent_config": config})))["agent_id"]
        session = await ok(await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}))
        body = {"messages": [{"role": "user", "content": "search"}], "stream": False}
        url = f"/v1/agents/{agent_id}/session/{session['session_id']}/turn"
        turn = await ok(await http.post(url, json=body))
    content = turn["steps"][1]["tool_responses"][0]["content"]
    assert content.startswith("error: web search is not configured on this server")
