"""A replica killed mid-stream: the survivor replays every event a client received, same ids, then the failure.

Replica ``a`` reaches Redis through a relay the test holds: while it is held,
what ``a`` writes to its streams waits, as on a slow network, and the kill
cuts it (lost in flight). A replica that sent events before its stream held
them would have a client receive events that the survivor cannot replay, and
the survivor would number its failure over them. On PostgreSQL, ``b``'s link
is held too while it fails ``a``'s turns: a reader that arrives between the
turn's failure and its failure event must still be led to that event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from integration_helpers import (
    gate_name,
    iter_frames,
    open_gate_finally,
    run_turn,
    turn_url,
    user,
    wait_for,
    wait_for_requests,
    wait_for_status,
)
from redis_link import RedisLink
from replicas import redis_url, shared_state

from ferryman.testing import ScriptedReply, ScriptedServerClient
from support import Proc, create_agent, create_session, ferryman_proc

LEASE_SECONDS = 3.0
"""Longer than the hold: a held replica renews its leases late, but in time."""
HOLD_SECONDS = 1.0
"""How long what ``a`` writes to Redis waits: long enough to read and kill within it."""
B_HOLD_SECONDS = LEASE_SECONDS * 2 + 2
"""How long what ``b`` sends to Redis waits after the kill: past the moment it fails ``a``'s turns."""

Frame = tuple[int, dict[str, Any]]


@dataclass
class Replicas:
    """Replicas ``a`` and ``b`` over one database and one Redis, each reaching Redis through its link."""

    kind: str
    a_proc: Proc
    a: httpx.Client
    b: httpx.Client
    a_link: RedisLink
    b_link: RedisLink


@pytest.fixture(params=["postgres", "redis"])
def replicas(request: pytest.FixtureRequest, tmp_path: Path, scripted_proc: tuple[Proc, str]) -> Iterator[Replicas]:
    """Records in PostgreSQL with Redis for coordination, or everything in Redis."""
    with shared_state(request.param) as (db_url, coordination), ExitStack() as stack:
        links = [stack.enter_context(RedisLink(redis_url())) for _ in range(2)]
        started = []
        for link in links:
            # Patient: a command waits out a hold rather than failing after redis-py's default 5 s.
            redis = f"{link.through(coordination)}&socket_timeout={B_HOLD_SECONDS * 2}"
            db = redis if request.param == "redis" else db_url
            options = ("--redis", redis, "--turn-lease", str(LEASE_SECONDS))
            started.append(ferryman_proc(tmp_path, scripted_proc[1], db, *options))
        for proc, _ in started:
            stack.callback(proc.stop)
            proc.launch()
        for proc, _ in started:
            proc.wait_healthy()
        a, b = (stack.enter_context(httpx.Client(base_url=base, timeout=30)) for _, base in started)
        yield Replicas(request.param, started[0][0], a, b, *links)


@dataclass
class Stream:
    """A streamed turn or response a client reads from ``a``: what it received, and how to read on."""

    name: str
    frames: Iterator[Frame]
    failed: Callable[[dict[str, Any]], bool]
    """Whether an event is the failure the survivor ends the stream with."""
    replay: Callable[[httpx.Client, int], list[Frame]]
    """The stream's events on a replica after the given number."""
    status: Callable[[httpx.Client], str]
    received: list[Frame] = field(default_factory=list)
    session: tuple[str, str] | None = None
    """The agent and session of a turn."""

    def read_until(self, done: Callable[[dict[str, Any]], bool]) -> None:
        """Read events until one for which ``done`` holds."""
        for frame in self.frames:
            self.received.append(frame)
            if done(frame[1]):
                return
        raise AssertionError(f"{self.name}: the stream ended early, after {self.received}")


def _sse(http: httpx.Client, url: str, params: dict[str, str], last_event_id: int) -> list[Frame]:
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id >= 0 else {}
    with http.stream("GET", url, params=params, headers=headers) as response:
        assert response.status_code == 200, response.read().decode()
        return list(iter_frames(response))


def _agents_stream(
    stack: ExitStack, http: httpx.Client, served_model: ScriptedServerClient, name: str, reply: ScriptedReply
) -> Stream:
    """A streamed turn on its own session, its model answer ``reply``; read up to its model call."""
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    asked = len(served_model.requests())
    served_model.enqueue(reply)
    body = {"messages": [user(name)], "stream": True}
    response = stack.enter_context(http.stream("POST", turn_url(agent_id, session_id), json=body))
    assert response.status_code == 200, response.read().decode()
    frames = iter_frames(response)
    first = next(frames)
    turn_id = first[1]["event"]["payload"]["turn_id"]
    url = turn_url(agent_id, session_id, turn_id)

    def status(client: httpx.Client) -> str:
        return str(wait_for_status(client, agent_id, session_id, turn_id, "failed", "completed")["status"])

    stream = Stream(
        name,
        frames,
        failed=lambda data: data.get("error", {}).get("code") == "interrupted",
        replay=lambda client, after: _sse(client, f"{url}/events", {}, after),
        status=status,
        received=[first],
        session=(agent_id, session_id),
    )
    wait_for_requests(served_model, asked + 1)
    return stream


def _responses_stream(
    stack: ExitStack, http: httpx.Client, served_model: ScriptedServerClient, name: str, reply: ScriptedReply
) -> Stream:
    """A streamed response, its model answer ``reply``; read up to its model call."""
    asked = len(served_model.requests())
    served_model.enqueue(reply)
    body = {"model": "scripted-model", "input": name, "stream": True}
    response = stack.enter_context(http.stream("POST", "/v1/responses", json=body))
    assert response.status_code == 200, response.read().decode()
    frames = iter_frames(response)
    first = next(frames)
    url = f"/v1/responses/{first[1]['response']['id']}"

    def status(client: httpx.Client) -> str:
        def ended() -> str | None:
            found = str(client.get(url).json()["status"])
            return found if found in ("failed", "completed") else None

        return wait_for(ended, what=f"{url} to end")

    stream = Stream(
        name,
        frames,
        failed=lambda data: data["type"] == "response.failed" and data["response"]["error"]["code"] == "interrupted",
        replay=lambda client, after: _sse(client, url, {"stream": "true"}, after),
        status=status,
        received=[first],
    )
    wait_for_requests(served_model, asked + 1)
    return stream


def _step_progress(count: int) -> Callable[[dict[str, Any]], bool]:
    seen = [0]

    def done(data: dict[str, Any]) -> bool:
        seen[0] += data["event"]["payload"]["event_type"] == "step_progress"
        return seen[0] == count

    return done


def _text_deltas(count: int) -> Callable[[dict[str, Any]], bool]:
    seen = [0]

    def done(data: dict[str, Any]) -> bool:
        seen[0] += data["type"] == "response.output_text.delta"
        return seen[0] == count

    return done


def test_a_replica_killed_mid_stream_leaves_every_event_a_client_received_replayable(
    replicas: Replicas, served_model: ScriptedServerClient
) -> None:
    a = replicas.a
    with ExitStack() as stack:
        gates = [stack.enter_context(open_gate_finally(served_model, gate_name())) for _ in range(6)]
        pauses = [stack.enter_context(open_gate_finally(served_model, gate_name())) for _ in range(4)]
        text = "one two three four "

        def reply(gate: str, pause: str | None = None, pause_after: int = 1) -> ScriptedReply:
            return ScriptedReply(text=text, chunks=4, gate=gate, pause=pause, pause_after=pause_after)

        # Killed right after the first event (the model is never answered): a turn, and a response.
        turn_started = _agents_stream(stack, a, served_model, "after turn_start", reply(gates[0]))
        response_created = _responses_stream(stack, a, served_model, "after response.created", reply(gates[1]))
        # Killed mid-text, and after the last word (right before the events that end the turn or response).
        turn_mid = _agents_stream(stack, a, served_model, "mid step_progress", reply(gates[2], pauses[0], 2))
        turn_end = _agents_stream(stack, a, served_model, "before turn_complete", reply(gates[3], pauses[1], 4))
        response_mid = _responses_stream(stack, a, served_model, "mid output_text", reply(gates[4], pauses[2], 2))
        response_end = _responses_stream(stack, a, served_model, "before completed", reply(gates[5], pauses[3], 4))
        turn_mid.read_until(lambda data: data["event"]["payload"]["event_type"] == "step_start")
        turn_end.read_until(lambda data: data["event"]["payload"]["event_type"] == "step_start")
        response_mid.read_until(lambda data: data["type"] == "response.in_progress")
        response_end.read_until(lambda data: data["type"] == "response.in_progress")

        # While a's writes to Redis wait, the models answer up to their pauses; the client reads
        # what a sends, a dies, and what it was still writing is lost.
        replicas.a_link.hold(HOLD_SECONDS)
        for gate in gates[2:]:
            served_model.open_gate(gate)
        turn_mid.read_until(_step_progress(2))
        turn_end.read_until(_step_progress(4))
        response_mid.read_until(_text_deltas(2))
        response_end.read_until(_text_deltas(4))
        replicas.a_link.cut()
        replicas.a_proc.kill()
        if replicas.kind == "postgres":
            # b's Redis is slow while b fails a's work: the turns are failed (in PostgreSQL) before their
            # failure events are stored; a reader arriving meanwhile must still be led to the failure.
            replicas.b_link.hold(B_HOLD_SECONDS)

        streams = [response_created, turn_started, turn_mid, turn_end, response_mid, response_end]
        for stream in streams:
            assert stream.status(replicas.b) == "failed", stream.name
            replayed = stream.replay(replicas.b, -1)
            ids = [frame_id for frame_id, _ in replayed]
            assert ids == list(range(len(ids))), (stream.name, ids)
            assert replayed[: len(stream.received)] == stream.received, stream.name
            assert stream.failed(replayed[-1][1]), (stream.name, replayed[-1])
            assert not any(stream.failed(data) for _, data in replayed[:-1]), stream.name
            if stream in (turn_started, response_created):  # a had sent its events up to the model call
                assert len(replayed) > len(stream.received) + 1, stream.name
            else:  # the client had every event a made
                assert len(replayed) == len(stream.received) + 1, (stream.name, replayed)
            # Reconnecting with the last event received leads to the failure.
            last = stream.received[-1][0]
            assert stream.replay(replicas.b, last) == replayed[last + 1 :], stream.name
    assert all(frame["sequence_number"] == seq for seq, frame in response_mid.received)
    # The session goes on.
    assert turn_mid.session is not None
    served_model.enqueue_text("back again")
    assert run_turn(replicas.b, *turn_mid.session, "again")["status"] == "completed"
