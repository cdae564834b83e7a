"""``ferryman.client`` against a real ``ferryman serve`` process over a socket."""

from __future__ import annotations

import pytest

from ferryman.api.agents import TurnStreamChunk
from ferryman.client import AsyncClient, Client
from ferryman.testing import ScriptedReply, ScriptedServerClient

pytestmark = pytest.mark.integration


def test_a_turn_runs_and_streams_over_http(served_base_url: str, served_model: ScriptedServerClient) -> None:
    served_model.enqueue(ScriptedReply(text="Four."), ScriptedReply(text="Streamed."))
    with Client(base_url=served_base_url) as client:
        agent_id = client.agents.create({"model": "scripted-model", "instructions": "Be brief."}).agent_id
        session_id = client.agents.sessions.create(agent_id, session_name="s").session_id
        turn = client.agents.turns.create(agent_id, session_id, messages=[{"role": "user", "content": "2+2?"}])
        assert turn.output_message.content == "Four."
        events = list(client.agents.turns.create(agent_id, session_id, stream=True,
                                                 messages=[{"role": "user", "content": "again"}]))  # fmt: skip
        last = events[-1].data
        assert isinstance(last, TurnStreamChunk) and last.event.payload.event_type == "turn_complete"


@pytest.mark.anyio
async def test_the_async_client_reads_over_http(served_base_url: str) -> None:
    async with AsyncClient(base_url=served_base_url) as client:
        agent_id = (await client.agents.create({"model": "scripted-model", "instructions": "x"})).agent_id
        assert agent_id in [a.agent_id async for a in await client.agents.list()]
        await client.agents.delete(agent_id)
