"""``multitask_strategy`` through ``ferryman.client``: the resources and ``AsyncAgent`` send it, the server obeys it.

Without it a second turn while one runs is refused (409, ``test_multitask.py``): each test here holds a first
turn (or response) at the scripted model's gate and sends the second through the SDK with a strategy.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from integration_helpers import message_text

from ferryman.api.agents import Turn
from ferryman.api.responses import Response
from ferryman.client import AsyncAgent, AsyncClient, ConflictError, TurnFailedError
from ferryman.testing import Script, ScriptedReply
from inprocess import BASE_URL, check_script, migrated_sqlite, served_services, serving

pytestmark = pytest.mark.anyio

MODEL = "scripted-model"
WAIT_SECONDS = 20


@pytest.fixture()
async def served(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[AsyncClient, Script]]:
    """An ``AsyncClient`` of a server on this loop, and the script of its model."""
    script = Script()
    services = served_services(Path(migrated_sqlite(tmp_path / "multitask.db")), script)
    async with serving(services) as http, AsyncClient(base_url=BASE_URL, http_client=http, max_retries=0) as client:
        yield client, script
    check_script(request, script)


def _texts(request: dict[str, object]) -> list[str]:
    messages = request["messages"]
    assert isinstance(messages, list)
    return [message_text(m) for m in messages if m["role"] in ("user", "assistant") and message_text(m)]


async def test_the_turns_resource_enqueues_a_turn_behind_the_running_one(served: tuple[AsyncClient, Script]) -> None:
    client, script = served
    agent_id = (await client.agents.create({"model": MODEL, "instructions": "Be brief."})).agent_id
    session_id = (await client.agents.sessions.create(agent_id, session_name="s")).session_id
    script.enqueue(ScriptedReply(text="first", gate="first"), ScriptedReply(text="second"))
    one = [{"role": "user", "content": "one"}]
    first = asyncio.create_task(client.agents.turns.create(agent_id, session_id, messages=one))
    await script.wait_for_requests(1)
    two = [{"role": "user", "content": "two"}]
    with pytest.raises(ConflictError):  # the server's default: reject
        await client.agents.turns.create(agent_id, session_id, messages=two)

    second = asyncio.create_task(
        client.agents.turns.create(agent_id, session_id, messages=two, multitask_strategy="enqueue")
    )
    async with asyncio.timeout(WAIT_SECONDS):
        while len(turns := (await client.agents.sessions.retrieve(agent_id, session_id)).turns) < 2:
            pass  # each read yields to the request's task
    assert [t.status for t in turns] == ["in_progress", "queued"]
    script.open_gate("first")
    assert (await first).status == "completed"
    queued = await second
    assert isinstance(queued, Turn) and queued.status == "completed"
    assert _texts(script.requests[1]) == ["one", "first", "two"], "the queued turn ran after the first"


async def test_the_responses_resource_enqueues_a_response_in_its_conversation(
    served: tuple[AsyncClient, Script],
) -> None:
    client, script = served
    conversation = (await client.conversations.create()).id
    script.enqueue(ScriptedReply(text="first", gate="first"), ScriptedReply(text="second"))
    first = asyncio.create_task(client.responses.create(model=MODEL, input="one", conversation=conversation))
    await script.wait_for_requests(1)
    with pytest.raises(ConflictError):
        await client.responses.create(model=MODEL, input="two", conversation=conversation)

    second = asyncio.create_task(
        client.responses.create(model=MODEL, input="two", conversation=conversation, multitask_strategy="enqueue")
    )
    async with asyncio.timeout(WAIT_SECONDS):
        while len(listed := [r async for r in await client.responses.list(conversation_id=conversation)]) < 2:
            pass
    assert [r.status for r in listed] == ["queued", "in_progress"]  # newest first
    script.open_gate("first")
    assert (await first).status == "completed"
    queued = await second
    assert isinstance(queued, Response) and queued.status == "completed"
    assert _texts(script.requests[1]) == ["one", "first", "two"]


@pytest.mark.parametrize("api", ["agents", "responses"])
async def test_an_async_agent_turn_interrupts_the_running_one(served: tuple[AsyncClient, Script], api: str) -> None:
    client, script = served
    agent = AsyncAgent(client, MODEL, "Be brief.", api=api)  # type: ignore[arg-type]
    await agent.create_session("s")
    script.enqueue(ScriptedReply(text="never", gate="never"), ScriptedReply(text="instead"))
    first = asyncio.create_task(agent.create_turn("one", stream=False))
    await script.wait_for_requests(1)

    second = await agent.create_turn("never mind", stream=False, multitask_strategy="interrupt")
    assert second.status == "completed"
    with pytest.raises(TurnFailedError) as failed:
        await first
    assert failed.value.code == "cancelled"
    assert _texts(script.requests[1]) == ["never mind"], "the interrupted turn is not in the history"
    script.open_gate("never")
