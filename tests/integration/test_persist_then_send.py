"""Persist, then send: a live turn's readers get an event only once the stream other replicas replay holds it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from redis_link import RedisLink
from replicas import redis_database, redis_url

from ferryman.api.agents import AgentConfig, CreateTurnRequest
from ferryman.api.content import UserMessage
from ferryman.coordination.base import Notice
from ferryman.coordination.redis_fanout import RedisFanout
from ferryman.redis_url import split_prefix
from ferryman.server.app import Services, build_services
from ferryman.storage.base import StoredEvent
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel, ScriptedReply
from inprocess import migrated_sqlite

pytestmark = pytest.mark.anyio

HOLD_SECONDS = 0.5


async def _ignore(_: Notice) -> None:
    """Notices play no part here."""


@dataclass
class Deployment:
    """Replica ``a`` (these services, reaching Redis through ``link``) and ``b``'s view of the streams."""

    a: Services
    b: RedisFanout
    model: ScriptedModel
    link: RedisLink
    agent_id: str


@pytest.fixture()
async def deployment(tmp_path: Path) -> AsyncIterator[Deployment]:
    with redis_database() as prefixed, RedisLink(redis_url()) as link:
        server, prefix = split_prefix(prefixed)
        model = ScriptedModel()
        fanout = RedisFanout(link.through(server), prefix, block_seconds=0.2)
        services = build_services(SqliteStore(migrated_sqlite(tmp_path / "a.db")), [model], fanout=fanout)
        b = RedisFanout(server, prefix)
        async with AsyncExitStack() as stack:
            await services.store.open()
            stack.push_async_callback(services.store.close)
            await fanout.open(_ignore)
            stack.push_async_callback(fanout.close)
            await b.open(_ignore)
            stack.push_async_callback(b.close)
            stack.push_async_callback(services.runner.shutdown)
            await services.models.refresh()
            agent_id = await services.agents.create_agent(AgentConfig(model="scripted-model", instructions="brief"))
            yield Deployment(services, b, model, link, agent_id)
        model.check()


async def _start(deployment: Deployment) -> tuple[str, AsyncIterator[StoredEvent]]:
    agents = deployment.a.agents
    session_id = await agents.create_session(deployment.agent_id, "s")
    request = CreateTurnRequest(messages=[UserMessage(content="hi")], stream=True)
    live = await agents.start_turn(deployment.agent_id, session_id, request)
    return f"turn:{live.turn_id}", live.channel.read()


async def test_an_event_reaches_a_reader_only_once_the_shared_stream_holds_it(deployment: Deployment) -> None:
    gate = "after-two-words"
    deployment.model.enqueue(ScriptedReply(text="one two three four", chunks=4, pause=gate, pause_after=2))
    deployment.link.hold(HOLD_SECONDS)  # a's writes to Redis wait a while
    stream, events = await _start(deployment)
    read: list[StoredEvent] = []
    async for event in events:
        # Whatever a reader got, another replica can already read back.
        assert (await deployment.b.recorded(stream, event.seq - 1))[:1] == [event]
        read.append(event)
        if _progress(read) == 2:
            break
    deployment.model.script.open_gate(gate)
    read.extend([event async for event in events])  # the run ended: its storage holds every event
    assert [event.seq for event in read] == list(range(len(read)))
    assert "turn_complete" in read[-1].data


def _progress(events: list[StoredEvent]) -> int:
    return sum('"step_progress"' in event.data for event in events)


async def test_events_numbered_after_another_replica_ended_the_stream_never_reach_readers(
    deployment: Deployment,
) -> None:
    gate = "after-two-words"
    deployment.model.enqueue(ScriptedReply(text="one two three four", chunks=4, pause=gate, pause_after=2))
    stream, events = await _start(deployment)
    read: list[StoredEvent] = []
    async for event in events:
        read.append(event)
        if _progress(read) == 2:
            break
    # b believes a dead and fails the turn: its failure takes the next number and ends the stream.
    recorded = await deployment.b.recorded(stream, -1)
    failure = json.dumps({"error": {"code": "interrupted"}})
    assert await deployment.b.append(stream, len(recorded), [failure])
    deployment.model.script.open_gate(gate)  # a goes on with the turn it still runs
    assert [event async for event in events] == []  # none of its later events is released
    assert recorded[: len(read)] == read
    assert await deployment.b.recorded(stream, -1) == [*recorded, StoredEvent(len(recorded), failure)]


async def test_a_reader_of_a_run_whose_stream_another_replica_ended_is_led_to_the_end_it_wrote(
    deployment: Deployment,
) -> None:
    gate = "after-two-words"
    deployment.model.enqueue(ScriptedReply(text="one two three four", chunks=4, pause=gate, pause_after=2))
    agents = deployment.a.agents
    session_id = await agents.create_session(deployment.agent_id, "s")
    request = CreateTurnRequest(messages=[UserMessage(content="hi")], stream=True)
    live = await agents.start_turn(deployment.agent_id, session_id, request)
    read: list[StoredEvent] = []
    async for event in live.channel.read():
        read.append(event)
        if _progress(read) == 2:
            break
    # The client reconnects after the last event it got (Last-Event-ID) while the run goes on here.
    reconnected = await agents.turn_events(deployment.agent_id, session_id, live.turn_id, read[-1].seq)
    # b believes a dead and ends the stream with the turn's failure; a's next event is refused.
    stream = f"turn:{live.turn_id}"
    assert await deployment.b.recorded(stream, -1) == read
    failure = json.dumps({"error": {"code": "interrupted"}})
    assert await deployment.b.append(stream, len(read), [failure])
    deployment.model.script.open_gate(gate)
    assert [event async for event in reconnected] == [StoredEvent(len(read), failure)]
