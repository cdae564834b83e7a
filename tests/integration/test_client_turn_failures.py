"""A failed turn raises ``TurnFailedError`` with the failure code: sync or async, streamed or not, both APIs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from ferryman.client import Agent, AsyncAgent, AsyncClient, Client, NotFoundError, TurnFailedError
from ferryman.client.events import AgentEvent, TurnFailed
from ferryman.server.app import Services
from ferryman.testing import Script, ScriptedError, ScriptedReply
from inprocess import BASE_URL, Served, check_script, migrated_sqlite, served_services, serving

MODEL = "scripted-model"
APIS = ["agents", "responses"]
# A 400 from the model: the server does not repeat it, and the turn fails ``upstream_error``.
FAILING = ScriptedReply(error=ScriptedError(status_code=400, message="the model refused the request"))


@pytest.fixture()
def client(model: Served) -> Iterator[Client]:
    """A client of the in-process server that never retries a request."""
    with Client(base_url=BASE_URL, http_client=model.http_client(), max_retries=0) as sdk:
        yield sdk


def check_upstream_failure(error: TurnFailedError, api: str, seen: list[AgentEvent] | None) -> None:
    """The error carries the code and the ids; streamed, the ``TurnFailed`` event came first and says the same."""
    assert (error.code, error.message) == ("upstream_error", "model scripted-model failed upstream: Error code: 400 - "
                                           "the model refused the request")  # fmt: skip
    assert error.turn_id
    if api == "responses":
        assert error.response_id is not None and error.response_id.startswith("resp")
    else:
        assert error.response_id is None
    if seen is None:
        assert error.status_code == 502  # the non-streamed call's error answer
        assert error.turn_id in str(error.body)
        return
    assert error.status_code is None
    last = seen[-1]
    assert isinstance(last, TurnFailed)
    assert (last.code, last.message, last.turn_id) == (error.code, error.message, error.turn_id)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
def test_a_failed_turn_raises_turn_failed_error_with_its_code(
    client: Client, model: Served, api: str, stream: bool
) -> None:
    agent = Agent(client, MODEL, "Be brief.", api=api)  # type: ignore[arg-type]
    agent.create_session()
    model.enqueue(FAILING)
    seen: list[AgentEvent] = []
    with pytest.raises(TurnFailedError) as raised:
        if stream:
            for event in agent.create_turn("Hi."):
                seen.append(event)
        else:
            agent.create_turn("Hi.", stream=False)
    check_upstream_failure(raised.value, api, seen if stream else None)


def test_a_stream_read_up_to_its_failure_event_raises_nothing(client: Client, model: Served) -> None:
    agent = Agent(client, MODEL, "Be brief.")
    agent.create_session()
    model.enqueue(FAILING)
    for event in agent.create_turn("Hi."):
        if isinstance(event, TurnFailed):
            break
    else:
        raise AssertionError("no TurnFailed event")


def test_a_rejected_request_keeps_its_own_error(client: Client, model: Served) -> None:
    agent = Agent(client, MODEL, "Be brief.")
    with pytest.raises(NotFoundError) as raised:
        agent.create_turn("Hi.", "no-such-session", stream=False)
    assert not isinstance(raised.value, TurnFailedError)


@pytest.fixture()
async def served(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[AsyncClient, Script, Services]]:
    """An ``AsyncClient`` of a server on this loop, the script of its model, and the server's services."""
    script = Script()
    services = served_services(Path(migrated_sqlite(tmp_path / "failures.db")), script)
    async with serving(services) as http, AsyncClient(base_url=BASE_URL, http_client=http, max_retries=0) as client:
        yield client, script, services
    check_script(request, script)


async def run_turn(agent: AsyncAgent, stream: bool, seen: list[AgentEvent]) -> None:
    """One turn of ``agent``, its events (when streamed) into ``seen``."""
    if stream:
        async for event in await agent.create_turn("Hi."):
            seen.append(event)
    else:
        await agent.create_turn("Hi.", stream=False)


@pytest.mark.anyio
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
async def test_a_failed_async_turn_raises_turn_failed_error_with_its_code(
    served: tuple[AsyncClient, Script, Services], api: str, stream: bool
) -> None:
    client, script, _ = served
    agent = AsyncAgent(client, MODEL, "Be brief.", api=api)  # type: ignore[arg-type]
    await agent.create_session()
    script.enqueue(FAILING)
    seen: list[AgentEvent] = []
    with pytest.raises(TurnFailedError) as raised:
        await run_turn(agent, stream, seen)
    check_upstream_failure(raised.value, api, seen if stream else None)


@pytest.mark.anyio
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
@pytest.mark.parametrize("stop", ["cancelled", "interrupted"])
async def test_a_cancelled_or_interrupted_turn_raises_with_that_code(
    served: tuple[AsyncClient, Script, Services], api: str, stream: bool, stop: str
) -> None:
    client, script, services = served
    agent = AsyncAgent(client, MODEL, "Be brief.", api=api)  # type: ignore[arg-type]
    session_id = await agent.create_session()
    script.enqueue(ScriptedReply(text="never sent", gate="held"))
    seen: list[AgentEvent] = []
    running = asyncio.create_task(run_turn(agent, stream, seen))
    await script.wait_for_requests(1)
    if stop == "interrupted":
        await services.runner.shutdown()  # what the server does as it stops
    elif api == "agents":
        assert agent.agent_id is not None
        await client.agents.sessions.delete(agent.agent_id, session_id)
    else:
        [response] = (await client.responses.list()).data
        await client.responses.delete(response.id)
    with pytest.raises(TurnFailedError) as raised:
        await running
    assert raised.value.code == stop
    if stream:
        assert isinstance(seen[-1], TurnFailed) and seen[-1].code == stop
