"""``ferryman.client.AsyncAgent`` against the server served in this event loop: async and sync client tools."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ferryman.api.agents import Turn
from ferryman.api.approvals import ApprovalRequest
from ferryman.client import AsyncAgent, AsyncClient, client_tool
from ferryman.client.events import AgentEvent, TurnCompleted
from ferryman.testing import Script, ScriptedReply, ScriptedToolCall
from inprocess import BASE_URL, check_script, migrated_sqlite, served_services, serving

pytestmark = pytest.mark.anyio
MODEL = "scripted-model"


@client_tool
async def slow_double(x: int) -> int:
    """Double a number, eventually.

    Args:
        x: The number.
    """
    await asyncio.sleep(0)
    return 2 * x


@client_tool
def shout(text: str) -> str:
    """Upper-case a text.

    :param text: The text.
    """
    return text.upper()


@pytest.fixture()
async def served(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[AsyncClient, Script]]:
    """An ``AsyncClient`` of a server on this loop, and the script of its model."""
    script = Script()
    services = served_services(Path(migrated_sqlite(tmp_path / "agent.db")), script)
    async with serving(services) as http, AsyncClient(base_url=BASE_URL, http_client=http, max_retries=0) as client:
        yield client, script
    check_script(request, script)


def both_tools_called() -> ScriptedReply:
    """The model calls both client tools at once."""
    return ScriptedReply(
        tool_calls=[
            ScriptedToolCall(name="slow_double", arguments={"x": 21}),
            ScriptedToolCall(name="shout", arguments={"text": "hi"}),
        ]
    )


@pytest.mark.parametrize("api", ["agents", "responses"])
async def test_async_and_sync_client_tools_run_and_the_turn_completes(
    served: tuple[AsyncClient, Script], api: str
) -> None:
    client, script = served
    agent = AsyncAgent(client, MODEL, "Be brief.", tools=[slow_double, shout], api=api)  # type: ignore[arg-type]
    await agent.create_session("s")
    script.enqueue(both_tools_called(), ScriptedReply(text="42 and HI."))
    events: list[AgentEvent] = [event async for event in await agent.create_turn("Go.")]
    done = events[-1]
    assert isinstance(done, TurnCompleted) and done.output_text == "42 and HI."
    tool_results = [m["content"] for m in script.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_results == ["42", "HI"]


async def test_a_non_streamed_async_turn_asks_an_async_approval_callback(served: tuple[AsyncClient, Script]) -> None:
    client, script = served
    asked: list[str] = []

    async def approve(request: ApprovalRequest) -> bool:
        asked.append(request.tool_name)
        return False

    agent = AsyncAgent(client, MODEL, "Math.", tools=["builtin::math"], require_approval="always", on_approval=approve)
    await agent.create_session()
    script.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="calculator", arguments={"expression": "2+2"})]))
    script.enqueue(ScriptedReply(text="Not allowed."))
    turn = await agent.create_turn("2+2?", stream=False)
    assert isinstance(turn, Turn) and turn.output_message.content == "Not allowed."
    assert asked == ["calculator"]
    tool_results = [m["content"] for m in script.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_results == ["the user denied this call: refused by the caller"]
