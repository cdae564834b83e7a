"""``ferryman.client`` against the in-process server: agents, sessions, turns, steps, streams and retries."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from client_support import AsyncCutting, Recorder

from ferryman.api.agents import TurnStreamChunk
from ferryman.client import AsyncClient, Client, NotFoundError, ServerEvent, TurnData, _transport
from ferryman.server.app import create_app
from ferryman.testing import Script, ScriptedReply
from inprocess import Served, served_services

CONFIG = {"model": "scripted-model", "instructions": "Be brief."}


def client_for(model: Served, recorder: Recorder | None = None) -> Client:
    http = recorder.http_client() if recorder else model.http_client()
    return Client(http_client=http, max_retries=2)


def event_types(events: list[ServerEvent[TurnData]]) -> list[str]:
    return [e.data.event.payload.event_type for e in events if isinstance(e.data, TurnStreamChunk)]


def test_agents_and_sessions_are_created_read_listed_page_by_page_and_deleted(model: Served) -> None:
    client = client_for(model)
    ids = [client.agents.create(CONFIG).agent_id for _ in range(3)]
    assert client.agents.retrieve(ids[0]).agent_config.instructions == "Be brief."
    first = client.agents.list(limit=2)
    assert len(first.data) == 2 and first.has_more
    assert set(ids) <= {agent.agent_id for agent in client.agents.list(limit=1)}  # iterates every page
    sessions = [client.agents.sessions.create(ids[0], session_name=f"s{i}").session_id for i in range(3)]
    assert [s.session_id for s in client.agents.sessions.list(ids[0], limit=2)] == sessions
    assert client.agents.sessions.retrieve(ids[0], sessions[1]).session_name == "s1"
    client.agents.sessions.delete(ids[0], sessions[1])
    with pytest.raises(NotFoundError) as missing:
        client.agents.sessions.retrieve(ids[0], sessions[1])
    assert missing.value.code == "not_found"
    for agent_id in ids:
        client.agents.delete(agent_id)
    with pytest.raises(NotFoundError):
        client.agents.retrieve(ids[0])


def test_a_turn_runs_and_its_turn_and_steps_are_read(model: Served) -> None:
    client = client_for(model)
    agent_id = client.agents.create(CONFIG).agent_id
    session_id = client.agents.sessions.create(agent_id, session_name="s").session_id
    model.enqueue(ScriptedReply(text="Four."))
    turn = client.agents.turns.create(agent_id, session_id, messages=[{"role": "user", "content": "2+2?"}])
    assert turn.output_message.content == "Four." and turn.status == "completed"
    assert client.agents.turns.retrieve(agent_id, session_id, turn.turn_id).turn_id == turn.turn_id
    step = client.agents.steps.retrieve(agent_id, session_id, turn.turn_id, turn.steps[0].step_id)
    assert step.step_type == "inference"


def test_a_streamed_turn_yields_every_event_once_with_its_number(model: Served) -> None:
    client = client_for(model)
    agent_id = client.agents.create(CONFIG).agent_id
    session_id = client.agents.sessions.create(agent_id, session_name="s").session_id
    model.enqueue(ScriptedReply(text="Hello there.", chunks=3))
    with client.agents.turns.create(agent_id, session_id, messages=[{"role": "user", "content": "hi"}],
                                    stream=True) as stream:  # fmt: skip
        events = list(stream)
    kinds = event_types(events)
    assert kinds[0] == "turn_start" and kinds[-1] == "turn_complete" and kinds.count("step_progress") >= 3
    ids = [e.id for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_a_dropped_stream_is_read_on_with_last_event_id_and_loses_or_repeats_nothing(model: Served) -> None:
    recorder = Recorder(model, cut_after=3)
    client = client_for(model, recorder)
    agent_id = client.agents.create(CONFIG).agent_id
    session_id = client.agents.sessions.create(agent_id, session_name="s").session_id
    model.enqueue(ScriptedReply(text="One two three four five.", chunks=5))
    stream = client.agents.turns.create(agent_id, session_id, messages=[{"role": "user", "content": "count"}],
                                        stream=True)  # fmt: skip
    events = list(stream)
    turn_id = events[0].data.event.payload.turn_id  # type: ignore[union-attr]
    replay = list(client.agents.turns.events(agent_id, session_id, turn_id))
    assert [(e.id, e.data) for e in events] == [(e.id, e.data) for e in replay]
    assert event_types(events)[-1] == "turn_complete"
    follow = [r for r in recorder.requests if r.url.path.endswith("/events") and "last-event-id" in r.headers]
    assert len(follow) == 1 and follow[0].headers["last-event-id"] == str(events[2].id)


def test_a_retried_turn_runs_once_under_its_idempotency_key(model: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_transport.time, "sleep", lambda seconds: None)
    recorder = Recorder(model)
    lost = {"turn": True}

    def lose_first_answer(request: httpx.Request) -> httpx.Response:
        response = recorder(request)
        if request.url.path.endswith("/turn") and lost.pop("turn", False):
            response.read()  # the server ran the turn; its answer never arrives
            raise httpx.ReadError("connection reset by peer")
        return response

    http = httpx.Client(transport=httpx.MockTransport(lose_first_answer), base_url="http://ferryman")
    client = Client(http_client=http)
    agent_id = client.agents.create(CONFIG).agent_id
    session_id = client.agents.sessions.create(agent_id, session_name="s").session_id
    model.enqueue(ScriptedReply(text="Only once."))  # a second run would find no reply: the script fails the test
    turn = client.agents.turns.create(agent_id, session_id, messages=[{"role": "user", "content": "hi"}])
    assert turn.output_message.content == "Only once."
    posts = [r for r in recorder.requests if r.url.path.endswith("/turn")]
    assert len(posts) == 2 and posts[0].headers["Idempotency-Key"] == posts[1].headers["Idempotency-Key"]
    assert [t.turn_id for t in client.agents.sessions.retrieve(agent_id, session_id).turns] == [turn.turn_id]


@pytest.mark.anyio
async def test_the_async_client_reads_on_after_a_stream_ends_early(tmp_path: Path) -> None:
    script = Script()
    services = served_services(tmp_path / "ferryman.db", script)
    app = create_app(services)
    cutting = AsyncCutting(httpx.ASGITransport(app=app), events=2)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=cutting, base_url="http://ferryman") as http,
        AsyncClient(http_client=http) as client,
    ):
        agent_id = (await client.agents.create(CONFIG)).agent_id
        session_id = (await client.agents.sessions.create(agent_id, session_name="s")).session_id
        script.enqueue(ScriptedReply(text="a b c d", chunks=4))
        stream = await client.agents.turns.create(agent_id, session_id, messages=[{"role": "user", "content": "x"}],
                                                  stream=True)  # fmt: skip
        events = [event async for event in stream]
        turn_id = events[0].data.event.payload.turn_id  # type: ignore[union-attr]
        replay = [event async for event in client.agents.turns.events(agent_id, session_id, turn_id)]
    assert [(e.id, e.data) for e in events] == [(e.id, e.data) for e in replay]
    assert event_types(events)[-1] == "turn_complete"
    assert [r.headers.get("last-event-id") for r in cutting.requests if r.url.path.endswith("/events")][0] == str(
        events[1].id
    )
    script.check()
