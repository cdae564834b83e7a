"""A resume sent the moment a pause is announced, while the paused run still stores its events."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ferryman.api.agents import AgentConfig, CreateTurnRequest, ResumeTurnRequest
from ferryman.api.content import ToolDef, ToolResponse, UserMessage
from ferryman.server.app import Services, build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall

pytestmark = pytest.mark.anyio

WEATHER = ToolDef(name="get_weather", description="weather", parameters=[])


class SlowEventStore(SqliteStore):
    """SQLite whose event writes are late, like a database busy for a moment.

    A write waits until someone counted the turn's stored events (a resume too
    eager would, and would count the paused run's events as missing), or for
    a second at most (a resume that waits for them does not count before).
    """

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.counted = asyncio.Event()

    async def turn_event_count(self, turn_id: str) -> int:
        count = await super().turn_event_count(turn_id)
        self.counted.set()
        return count

    async def save_turn_events(self, turn_id: str, first_seq: int, events: list[str]) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await self.counted.wait()
        await super().save_turn_events(turn_id, first_seq, events)


@pytest.fixture()
async def slow(tmp_path: Path, scripted: ScriptedModel) -> AsyncIterator[tuple[Services, SlowEventStore]]:
    store = SlowEventStore(str(tmp_path / "slow.db"))
    built = build_services(store, [scripted])
    await store.open()
    await built.models.refresh()
    yield built, store
    await built.runner.shutdown()
    await store.close()


async def test_the_resumed_run_numbers_its_events_after_the_paused_runs_and_stays_tracked(
    slow: tuple[Services, SlowEventStore], scripted: ScriptedModel
) -> None:
    services, store = slow
    agent_id = await services.agents.create_agent(
        AgentConfig(model="scripted-model", instructions="be brief", client_tools=[WEATHER])
    )
    session_id = await services.agents.create_session(agent_id, "s")
    scripted.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id="c1")]))
    scripted.enqueue_text("sunny")
    question = CreateTurnRequest(messages=[UserMessage(content="?")])
    paused = await services.agents.start_turn(agent_id, session_id, question)
    first_run = []
    async for frame in paused.channel.read():
        first_run.append(frame)
        if "turn_awaiting_input" in frame.data:
            break  # the pause is announced; the run's events still wait to be stored
    assert not paused.task.done()

    answer = ResumeTurnRequest(tool_responses=[ToolResponse(call_id="c1", tool_name="get_weather", content="sun")])
    resumed = await services.agents.resume_turn(agent_id, session_id, paused.turn_id, answer)
    assert services.runner.task(paused.turn_id) is resumed.task
    second_run = [frame async for frame in resumed.channel.read()]
    await resumed.task
    ids = [event.seq for event in first_run + second_run]
    assert ids == list(range(len(ids)))
    assert await store.turn_events_after(paused.turn_id, -1) == first_run + second_run
