"""The MCP client pool against real MCP servers (the SDK's MCPServer in subprocesses) over both transports."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from ferryman.api.content import ImageContentItem, TextContentItem, content_to_text
from ferryman.api.registry import ToolInvocationResult
from ferryman.config import ToolSettings
from ferryman.errors import InvalidRequestError, UpstreamError
from ferryman.safe_fetch import FetchPolicy
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.tools.context import ToolContext, tool_context
from ferryman.tools.mcp import McpClientPool, McpEndpoint, McpSettings, McpTool, fixed, from_provider_data
from inprocess import migrated_sqlite, serving
from mcp_servers import LOCAL_FETCH, RunningServer, start_mcp_server, stop_mcp_server

pytestmark = pytest.mark.anyio

SECRET = "s3cret-token-value"


@asynccontextmanager
async def pool_of(policy: FetchPolicy = LOCAL_FETCH, **settings: float) -> AsyncIterator[McpClientPool]:
    pool = McpClientPool(policy, McpSettings(**settings))
    try:
        yield pool
    finally:
        await pool.close()


def text(result: ToolInvocationResult) -> str:
    assert result.error_message is None, result.error_message
    return content_to_text(result.content)


@pytest.fixture(params=["streamable_http", "sse", "auto"])
def endpoint(request: pytest.FixtureRequest) -> McpEndpoint:
    """Each transport, ``auto`` over the SSE server (so it has to fall back)."""
    transport = request.param
    fixture = "mcp_http_server" if transport == "streamable_http" else "mcp_sse_server"
    server: RunningServer = request.getfixturevalue(fixture)
    return McpEndpoint(server.url, transport, {"X-Test-Token": SECRET})


async def test_lists_tools_with_their_schema(endpoint: McpEndpoint) -> None:
    async with pool_of() as pool:
        tools = {tool.name: tool for tool in await pool.list_tools(endpoint)}
    assert {"add", "echo", "whoami", "fail", "hang"} <= set(tools)
    add = tools["add"]
    assert add.description == "Add two integers."
    assert [(p.name, p.parameter_type, p.required) for p in add.parameters or []] == [
        ("a", "integer", True),
        ("b", "integer", True),
    ]
    assert add.input_schema is not None and add.input_schema["required"] == ["a", "b"]


async def test_calls_tools_and_converts_their_content(endpoint: McpEndpoint) -> None:
    async with pool_of() as pool:
        assert text(await pool.call_tool(endpoint, "add", {"a": 2, "b": 40})) == "42"
        assert text(await pool.call_tool(endpoint, "whoami", {})) == SECRET
        picture = await pool.call_tool(endpoint, "picture", {})
        document = await pool.call_tool(endpoint, "document", {})
    assert isinstance(picture.content, list)
    caption, image = picture.content
    assert isinstance(caption, TextContentItem) and caption.text == "a pixel"
    assert isinstance(image, ImageContentItem) and image.image.data
    assert text(document) == "the memo"


async def test_a_failing_or_unknown_tool_is_an_error_result(endpoint: McpEndpoint) -> None:
    async with pool_of() as pool:
        failed = await pool.call_tool(endpoint, "fail", {})
        unknown = await pool.call_tool(endpoint, "no_such_tool", {})
        still_fine = await pool.call_tool(endpoint, "echo", {"text": "after"})
    assert failed.error_message and "fail" in failed.error_message
    assert unknown.error_message and "no_such_tool" in unknown.error_message
    assert text(still_fine) == "after"


async def test_a_hanging_tool_times_out_and_the_connection_stays_usable(endpoint: McpEndpoint) -> None:
    async with pool_of(timeout_seconds=0.5) as pool:
        hung = await asyncio.wait_for(pool.call_tool(endpoint, "hang", {}), 5)
        after = await pool.call_tool(endpoint, "echo", {"text": "still here"})
    assert hung.error_message and "within 0.5 s" in hung.error_message
    assert text(after) == "still here"


async def test_connections_are_shared_per_endpoint_and_credentials(mcp_http_server: RunningServer) -> None:
    alice = McpEndpoint(mcp_http_server.url, "streamable_http", {"X-Test-Token": "alice"})
    bob = McpEndpoint(mcp_http_server.url, "streamable_http", {"X-Test-Token": "bob"})
    async with pool_of() as pool:
        first = text(await pool.call_tool(alice, "connection", {}))
        again = text(await pool.call_tool(alice, "connection", {}))
        other = text(await pool.call_tool(bob, "connection", {}))
        assert text(await pool.call_tool(bob, "whoami", {})) == "bob"
        assert pool.connection(alice) is not pool.connection(bob)
    assert first == again
    assert other != first


async def test_concurrent_calls_share_one_connection(mcp_sse_server: RunningServer) -> None:
    endpoint = McpEndpoint(mcp_sse_server.url, "sse")
    async with pool_of(timeout_seconds=1) as pool:
        hung, *echoes = await asyncio.gather(
            pool.call_tool(endpoint, "hang", {}),
            *(pool.call_tool(endpoint, "echo", {"text": str(i)}) for i in range(5)),
        )
        connection = pool.connection(endpoint)
    assert hung.error_message
    assert [text(echo) for echo in echoes] == [str(i) for i in range(5)]
    assert connection is not None


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_a_killed_server_is_an_error_then_the_pool_reconnects(transport: str) -> None:
    server = start_mcp_server(transport)  # type: ignore[arg-type]
    endpoint = McpEndpoint(server.url, transport)  # type: ignore[arg-type]
    async with pool_of(connect_timeout_seconds=5) as pool:
        try:
            assert text(await pool.call_tool(endpoint, "add", {"a": 1, "b": 1})) == "2"
            stop_mcp_server(server)
            down = await pool.call_tool(endpoint, "add", {"a": 1, "b": 1})
            with pytest.raises(UpstreamError):
                await pool.list_tools(endpoint)
            server = start_mcp_server(transport, server.port)  # type: ignore[arg-type]
            back = await pool.call_tool(endpoint, "add", {"a": 2, "b": 2})
        finally:
            stop_mcp_server(server)
    assert down.error_message and server.url in down.error_message
    assert text(back) == "4"


async def test_a_server_that_never_answers_fails_within_the_connect_timeout() -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)

    listener = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        async with pool_of(connect_timeout_seconds=0.5) as pool:
            result = await asyncio.wait_for(pool.call_tool(McpEndpoint(f"http://127.0.0.1:{port}/mcp"), "add", {}), 10)
    finally:
        for writer in accepted:
            writer.close()
        listener.close()
        await listener.wait_closed()
    assert result.error_message and "within 0.5 s" in result.error_message
    assert accepted


async def test_an_idle_connection_closes_itself(mcp_http_server: RunningServer) -> None:
    endpoint = McpEndpoint(mcp_http_server.url, "streamable_http")
    async with pool_of(idle_seconds=0.2) as pool:
        assert text(await pool.call_tool(endpoint, "echo", {"text": "x"})) == "x"
        connection = pool.connection(endpoint)
        assert connection is not None
        await asyncio.wait_for(connection.wait_closed(), 5)
        assert pool.connection(endpoint) is None
        assert text(await pool.call_tool(endpoint, "echo", {"text": "y"})) == "y"


async def test_a_closed_pool_refuses_calls(mcp_http_server: RunningServer) -> None:
    endpoint = McpEndpoint(mcp_http_server.url, "streamable_http")
    async with pool_of() as pool:
        assert text(await pool.call_tool(endpoint, "echo", {"text": "x"})) == "x"
        connection = pool.connection(endpoint)
        await pool.close()
        refused = await pool.call_tool(endpoint, "echo", {"text": "x"})
    assert connection is not None and connection.closed
    assert refused.error_message and "closed" in refused.error_message


async def test_a_private_address_is_refused_unless_allowed(mcp_http_server: RunningServer) -> None:
    endpoint = McpEndpoint(mcp_http_server.url, "streamable_http")
    async with pool_of(FetchPolicy()) as pool:
        refused = await pool.call_tool(endpoint, "echo", {"text": "x"})
        with pytest.raises(InvalidRequestError, match="not a public address"):
            await pool.list_tools(endpoint)
        with pytest.raises(InvalidRequestError, match="http"):
            await pool.list_tools(McpEndpoint("file:///etc/passwd"))
    assert refused.error_message and "fetch.allowed_hosts" in refused.error_message


async def test_credentials_appear_in_no_log_repr_or_error(
    mcp_http_server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    headers = {"Authorization": f"Bearer {SECRET}"}
    live = McpEndpoint(mcp_http_server.url, "streamable_http", headers)
    server = start_mcp_server("sse")
    stop_mcp_server(server)
    down = McpEndpoint(server.url, "auto", headers)
    private = McpEndpoint(f"http://user:{SECRET}@127.0.0.1:1/mcp?key={SECRET}", "sse", headers)
    messages: list[str] = [repr(live), str(live)]
    async with pool_of(connect_timeout_seconds=2) as pool:
        messages.append(text(await pool.call_tool(live, "echo", {"text": "x"})))
        for endpoint in (live, down):
            failure = await pool.call_tool(endpoint, "fail" if endpoint is live else "add", {})
            messages.append(failure.error_message or "")
        async with pool_of(FetchPolicy()) as strict:
            messages.append((await strict.call_tool(private, "add", {})).error_message or "")
        with pytest.raises(UpstreamError) as raised:
            await pool.list_tools(down)
    chain: BaseException | None = raised.value
    while chain is not None:
        messages.append(f"{chain!r} {chain}")
        chain = chain.__cause__ or chain.__context__
    assert all(message for message in messages[3:6])
    assert SECRET not in "\n".join(messages)
    assert SECRET not in caplog.text


async def test_mcp_tool_is_a_server_tool(mcp_http_server: RunningServer) -> None:
    endpoint = McpEndpoint(mcp_http_server.url, "streamable_http", {"X-Test-Token": SECRET})
    async with pool_of() as pool:
        listed = {tool.name: tool for tool in await pool.list_tools(endpoint)}
        add = McpTool(pool, listed["add"], "mcp::calc", fixed(endpoint))
        fail = McpTool(pool, listed["fail"], "mcp::calc", fixed(endpoint), name="calc__fail")
        assert text(await add.invoke({"a": 3, "b": 4})) == "7"
        failed = await fail.invoke({})
    definition = add.definition
    assert (definition.identifier, definition.toolgroup_id, definition.provider_id) == (
        "add",
        "mcp::calc",
        "model-context-protocol",
    )
    assert (fail.definition.identifier, fail.definition.provider_resource_id) == ("calc__fail", "fail")
    assert [parameter.name for parameter in definition.parameters] == ["a", "b"]
    assert add.input_schema and add.input_schema["required"] == ["a", "b"]
    assert definition.metadata and definition.metadata["annotations"] == {"readOnlyHint": True}
    assert SECRET not in definition.model_dump_json()
    assert failed.error_message


async def test_a_registered_mcp_tool_takes_the_running_calls_credentials(mcp_http_server: RunningServer) -> None:
    uri = f"{mcp_http_server.url}?key={SECRET}"
    async with pool_of() as pool:
        listed = {tool.name: tool for tool in await pool.list_tools(McpEndpoint(uri))}
        whoami = McpTool(pool, listed["whoami"], "mcp::me", from_provider_data(uri))
        anonymous = text(await whoami.invoke({}))
        data = {"mcp_headers": {mcp_http_server.url: {"X-Test-Token": "per-call"}}}
        token = tool_context.set(ToolContext(provider_data=data))
        try:
            named = text(await whoami.invoke({}))
        finally:
            tool_context.reset(token)
    assert (anonymous, named) == ("anonymous", "per-call")
    assert SECRET not in whoami.definition.model_dump_json()


async def test_the_app_configures_its_pool_and_closes_it_on_shutdown(
    tmp_path: Path, mcp_http_server: RunningServer
) -> None:
    endpoint = McpEndpoint(mcp_http_server.url, "streamable_http")
    settings = ToolSettings(mcp_timeout_seconds=7, mcp_connect_timeout_seconds=3, mcp_idle_seconds=90)
    store = SqliteStore(migrated_sqlite(tmp_path / "mcp.db"))
    services = build_services(store, [], sole_process=True, fetch=LOCAL_FETCH, tool_settings=settings)
    assert services.mcp.settings == McpSettings(timeout_seconds=7, connect_timeout_seconds=3, idle_seconds=90)
    async with serving(services):
        assert text(await services.mcp.call_tool(endpoint, "echo", {"text": "up"})) == "up"
        connection = services.mcp.connection(endpoint)
        assert connection is not None and not connection.closed
    assert connection.closed
