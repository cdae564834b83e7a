"""``webhook`` through ``ferryman.client``: the resources and ``AsyncAgent`` name it, the server posts each run's end.

The receiver is a real HTTP server on loopback, allowed by ``fetch.allowed_hosts``; each event's Standard
Webhooks signature is verified. The CLI's ``chat --webhook`` is in ``test_webhook_compact_cli.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from storage_backends import unopened_store

from ferryman.api.agents import Turn
from ferryman.api.responses import Response
from ferryman.client import AsyncAgent, AsyncClient, client_tool
from ferryman.safe_fetch import FetchPolicy
from ferryman.server.app import build_services
from ferryman.testing import ScriptedModel
from ferryman.webhook_settings import WebhookSettings
from ferryman.webhooks.signing import new_secret
from inprocess import BASE_URL, check_script, serving
from support import WEATHER_TOOL
from webhook_receiver import Receiver, receiving

pytestmark = pytest.mark.anyio

SECRET = new_secret()
MODEL = "scripted-model"


@client_tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


@pytest.fixture()
async def served(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[AsyncClient, ScriptedModel]]:
    """An ``AsyncClient`` of a server on this loop that may post to loopback, and its model."""
    model = ScriptedModel()
    async with unopened_store("sqlite", tmp_path) as store:
        services = build_services(
            store,
            [model],
            fetch=FetchPolicy(allowed_hosts=["127.0.0.1"]),
            webhooks=WebhookSettings(secret=SecretStr(SECRET), backoff_seconds=0.05),
        )
        async with serving(services) as http, AsyncClient(base_url=BASE_URL, http_client=http) as client:
            yield client, model
    check_script(request, model.script)


async def events(receiver: Receiver, count: int) -> list[dict[str, Any]]:
    """The first ``count`` events posted, each once its signature verified."""
    posted = await asyncio.to_thread(receiver.wait_for, count)
    return [p.verified(SECRET) for p in posted[:count]]


async def test_the_turns_resource_names_a_webhook_for_a_turn_and_for_its_resume(
    served: tuple[AsyncClient, ScriptedModel],
) -> None:
    client, model = served
    config = {"model": MODEL, "instructions": "Be brief.", "client_tools": [WEATHER_TOOL]}
    agent_id = (await client.agents.create(config)).agent_id
    session_id = (await client.agents.sessions.create(agent_id, session_name="hooked")).session_id
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    model.enqueue_text("Sunny.")
    with receiving() as receiver:
        messages = [{"role": "user", "content": "Weather?"}]
        paused = await client.agents.turns.create(agent_id, session_id, messages=messages, webhook=receiver.url)
        assert paused.status == "awaiting_input"
        (first,) = await events(receiver, 1)
        (call,) = paused.output_message.tool_calls or []
        answer = {"call_id": call.call_id, "tool_name": "get_weather", "content": "sunny"}
        resumed = await client.agents.turns.resume(
            agent_id, session_id, paused.turn_id, tool_responses=[answer], webhook=receiver.url
        )
        assert resumed.status == "completed"
        second = (await events(receiver, 2))[1]
    assert [first["type"], second["type"]] == ["turn.awaiting_input", "turn.completed"]
    assert second["data"] == (await client.agents.turns.retrieve(agent_id, session_id, paused.turn_id)).model_dump(
        mode="json"
    )
    listed = await client.webhook_deliveries.list(run_id=paused.turn_id)
    assert sorted(d.type for d in listed.data) == ["turn.awaiting_input", "turn.completed"]


async def test_the_responses_resource_names_a_webhook(served: tuple[AsyncClient, ScriptedModel]) -> None:
    client, model = served
    model.enqueue_text("Hello there.")
    with receiving() as receiver:
        made = await client.responses.create(model=MODEL, input="Hi", webhook=receiver.url)
        (event,) = await events(receiver, 1)
    assert event["type"] == "response.completed" and event["data"]["id"] == made.id


@pytest.mark.parametrize(("api", "ends"), [("agents", ["turn.awaiting_input", "turn.completed"]),
                                          ("responses", ["response.completed", "response.completed"])])  # fmt: skip
async def test_an_async_agent_turn_posts_the_end_of_each_of_its_runs(
    served: tuple[AsyncClient, ScriptedModel], api: str, ends: list[str]
) -> None:
    """The client tool's pause is a run's end; the agent's resume (or next response) names the webhook again."""
    client, model = served
    agent = AsyncAgent(client, MODEL, "Be brief.", tools=[get_weather], api=api)  # type: ignore[arg-type]
    await agent.create_session("hooked")
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    model.enqueue_text("Sunny in Paris.")
    with receiving() as receiver:
        result = await agent.create_turn("Weather in Paris?", stream=False, webhook=receiver.url)
        posted = await events(receiver, 2)
    assert [e["type"] for e in posted] == ends
    if isinstance(result, Turn):
        assert posted[-1]["data"]["turn_id"] == result.turn_id and posted[-1]["data"]["status"] == "completed"
    else:
        assert isinstance(result, Response)
        assert posted[-1]["data"]["id"] == result.id and posted[-1]["data"]["status"] == "completed"
    assert "sunny in Paris" in str(model.requests[-1]["messages"])


async def test_an_async_agent_without_a_webhook_names_none(served: tuple[AsyncClient, ScriptedModel]) -> None:
    client, model = served
    agent = AsyncAgent(client, MODEL, "Be brief.")
    await agent.create_session("quiet")
    model.enqueue_text("Hi.")
    await agent.create_turn("Hello", stream=False)
    assert (await client.webhook_deliveries.list()).data == []
