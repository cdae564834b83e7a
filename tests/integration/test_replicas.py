"""Two real replicas over one PostgreSQL and one Redis behave as one server; the test hops between them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from integration_helpers import (
    assert_error,
    gate_name,
    iter_frames,
    open_gate_finally,
    resume,
    run_turn,
    session_url,
    tool_response,
    turn_url,
    user,
    wait_for,
    wait_for_requests,
    wait_for_status,
)
from replicas import LEASE_SECONDS, replicas, shared_state

from ferryman.testing import ScriptedReply, ScriptedServerClient
from sse import Frame, frames
from support import WEATHER_TOOL, Proc, create_agent, create_session


class Pair:
    """Replicas ``a`` and ``b`` (processes and clients) over one database and one Redis."""

    def __init__(self, procs: list[Proc], bases: list[str]) -> None:
        self.procs, self.bases = procs, bases
        self.clients = [httpx.Client(base_url=base, timeout=30) for base in bases]

    @property
    def a(self) -> httpx.Client:
        return self.clients[0]

    @property
    def b(self) -> httpx.Client:
        return self.clients[1]

    def restart_the_dead(self) -> None:
        """Start again, on its port and with a new client, each replica a test killed."""
        for index, proc in enumerate(self.procs):
            if proc.process is not None and proc.process.poll() is not None:
                self.clients[index].close()
                proc.start()
                self.clients[index] = httpx.Client(base_url=self.bases[index], timeout=30)

    def close(self) -> None:
        """Close the clients and stop the replicas."""
        for client in self.clients:
            client.close()
        for proc in self.procs:
            proc.stop()


@pytest.fixture(scope="module", params=["postgres", "redis"])
def replica_pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, scripted_proc: tuple[Proc, str]
) -> Iterator[Pair]:
    """Records in PostgreSQL with Redis for coordination, or everything in Redis: one pair for the module.

    Starting two replicas takes seconds, so the tests of a module share them; each test makes its own
    agents, sessions and responses, and reads only those.
    """
    with shared_state(request.param) as (db_url, coordination):
        started = replicas(2, tmp_path_factory.mktemp("replicas"), scripted_proc[1], db_url, coordination)
        shared = Pair([proc for proc, _ in started], [base for _, base in started])
        try:
            yield shared
        finally:
            shared.close()


@pytest.fixture()
def pair(replica_pair: Pair, served_model: ScriptedServerClient) -> Pair:
    """The module's two replicas, both running: one an earlier test killed is started again first."""
    replica_pair.restart_the_dead()
    return replica_pair


def _events(http: httpx.Client, url: str, last_event_id: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    with http.stream("GET", f"{url}/events", headers=headers) as response:
        assert response.status_code == 200, response.read().decode()
        yield from iter_frames(response)


@dataclass
class HeldTurn:
    """A streamed turn whose model answer is held at ``gate``; ``frames`` goes on after ``first``."""

    turn_id: str
    first: tuple[int, dict[str, Any]]
    frames: Iterator[tuple[int, dict[str, Any]]]
    gate: str


@contextmanager
def held_turn(
    http: httpx.Client, served_model: ScriptedServerClient, agent_id: str, session_id: str
) -> Iterator[HeldTurn]:
    """Start a streamed turn whose next model answer waits at a gate (opened on exit) until it was asked for."""
    gate = gate_name()
    asked = len(served_model.requests())
    served_model.enqueue(ScriptedReply(text="held at the gate", gate=gate))
    with open_gate_finally(served_model, gate):
        body = {"messages": [user("question")], "stream": True}
        with http.stream("POST", turn_url(agent_id, session_id), json=body) as response:
            frames = iter_frames(response)
            first = next(frames)
            held = HeldTurn(first[1]["event"]["payload"]["turn_id"], first, frames, gate)
            wait_for_requests(served_model, asked + 1)
            yield held


def _kind(data: dict[str, Any]) -> str:
    return "error" if "error" in data else str(data["event"]["payload"]["event_type"])


def test_records_made_on_one_replica_are_read_on_the_other(pair: Pair) -> None:
    agent_id = create_agent(pair.a, toolgroups=["builtin::math"])
    session_id = create_session(pair.b, agent_id, "made on b")
    # Other tests of the module made agents on these replicas too: b lists the same ones as a, this one among them.
    listed = [agent["agent_id"] for agent in pair.b.get("/v1/agents").json()["data"]]
    assert agent_id in listed
    assert listed == [agent["agent_id"] for agent in pair.a.get("/v1/agents").json()["data"]]
    sessions = pair.a.get(f"/v1/agents/{agent_id}/sessions").json()["data"]
    assert [(s["session_id"], s["session_name"]) for s in sessions] == [(session_id, "made on b")]


def test_a_turn_paused_on_one_replica_is_resumed_on_the_other(pair: Pair, served_model: ScriptedServerClient) -> None:
    agent_id = create_agent(pair.a, client_tools=[WEATHER_TOOL])
    session_id = create_session(pair.a, agent_id)
    served_model.enqueue_tool_call("get_weather", {"city": "Lisbon"})
    paused = run_turn(pair.a, agent_id, session_id, "weather in Lisbon?")
    assert paused["status"] == "awaiting_input"
    [call] = paused["output_message"]["tool_calls"]
    served_model.enqueue_text("Sunny, 24 degrees.")
    response = resume(pair.b, agent_id, session_id, paused["turn_id"], [tool_response(call, "sunny, 24C")])
    assert response.status_code == 200, response.text
    done = response.json()
    assert done["status"] == "completed"
    assert done["output_message"]["content"] == "Sunny, 24 degrees."
    # One model call per inference step: one before the pause (on a), one after (on b).
    assert len(served_model.requests()) == 2
    seen_on_a = pair.a.get(turn_url(agent_id, session_id, paused["turn_id"])).json()
    assert seen_on_a["status"] == "completed"
    assert [s["step_type"] for s in seen_on_a["steps"]] == ["inference", "tool_execution", "inference"]
    # Resuming it again, on either replica, is refused.
    again = resume(pair.a, agent_id, session_id, paused["turn_id"], [tool_response(call, "twice")])
    assert_error(again, 409)


def test_a_turn_running_on_one_replica_refuses_a_second_turn_on_the_other(
    pair: Pair, served_model: ScriptedServerClient
) -> None:
    agent_id = create_agent(pair.a)
    session_id = create_session(pair.a, agent_id)
    with held_turn(pair.a, served_model, agent_id, session_id) as held:
        refused = pair.b.post(turn_url(agent_id, session_id), json={"messages": [user("second")], "stream": False})
        assert_error(refused, 409)
        served_model.open_gate(held.gate)
        assert _kind(list(held.frames)[-1][1]) == "turn_complete"
    served_model.enqueue_text("second answer")
    assert run_turn(pair.b, agent_id, session_id, "second")["status"] == "completed"
    assert len(served_model.requests()) == 2
    turns = pair.b.get(session_url(agent_id, session_id)).json()["turns"]
    assert [t["status"] for t in turns] == ["completed", "completed"]
    assert turns[0]["turn_id"] == held.turn_id


def test_a_client_reconnects_to_the_other_replica_and_misses_nothing(
    pair: Pair, served_model: ScriptedServerClient
) -> None:
    agent_id = create_agent(pair.a)
    session_id = create_session(pair.a, agent_id)
    gate = gate_name()
    served_model.enqueue(ScriptedReply(text="an answer held at the gate", gate=gate))
    with open_gate_finally(served_model, gate):
        body = {"messages": [user("hi")], "stream": True}
        with pair.a.stream("POST", turn_url(agent_id, session_id), json=body) as response:
            frames = iter_frames(response)
            first = [next(frames), next(frames)]
        wait_for_requests(served_model, 1)
        turn_id = first[0][1]["event"]["payload"]["turn_id"]
        url = turn_url(agent_id, session_id, turn_id)
        # From b, ask for everything after the first event: the second one was never stored
        # (the turn still runs on a), so b can only have it from a through Redis.
        followed = _events(pair.b, url, first[0][0])
        rest = [next(followed)]
        assert rest == first[1:]
        served_model.open_gate(gate)
        rest.extend(followed)
        first = first[:1]
    ids = [frame_id for frame_id, _ in first + rest]
    assert ids == list(range(len(ids)))
    assert _kind(rest[-1][1]) == "turn_complete"
    # Once finished, either replica replays the whole turn from storage, the same frames.
    assert list(_events(pair.a, url)) == first + rest
    assert list(_events(pair.b, url, 1)) == (first + rest)[2:]


def test_a_response_stream_is_resumed_on_the_other_replica(pair: Pair, served_model: ScriptedServerClient) -> None:
    gate = gate_name()
    served_model.enqueue(ScriptedReply(text="streamed words arrive later", gate=gate))
    with open_gate_finally(served_model, gate):
        body = {"model": "scripted-model", "input": "hi", "stream": True}
        with pair.a.stream("POST", "/v1/responses", json=body) as response:
            head = _response_events(frames(response), 2)
        response_id = head[0]["response"]["id"]
        wait_for_requests(served_model, 1)
        after = head[-1]["sequence_number"]
        with pair.b.stream(
            "GET", f"/v1/responses/{response_id}", params={"stream": "true", "starting_after": after}
        ) as r:
            assert r.status_code == 200
            events = frames(r)
            served_model.open_gate(gate)
            tail = _response_events(events, None)
    numbers = [event["sequence_number"] for event in head + tail]
    assert numbers == list(range(len(numbers)))
    assert tail[-1]["type"] == "response.completed"
    assert pair.b.get(f"/v1/responses/{response_id}").json()["status"] == "completed"


def _response_events(events: Iterator[Frame], count: int | None) -> list[dict[str, Any]]:
    """The data of the next ``count`` Responses stream events (all of them when None), each named by its type."""
    taken: list[dict[str, Any]] = []
    for frame in events:
        data = frame.json()
        assert frame.event == data["type"], frame
        taken.append(data)
        if count is not None and len(taken) == count:
            break
    return taken


def test_cancelling_a_background_response_reaches_the_replica_running_it(
    pair: Pair, served_model: ScriptedServerClient
) -> None:
    gate = gate_name()
    served_model.enqueue(ScriptedReply(text="never finished", gate=gate))
    with open_gate_finally(served_model, gate):
        started = pair.a.post("/v1/responses", json={"model": "scripted-model", "input": "hi", "background": True})
        response_id = started.json()["id"]
        wait_for_requests(served_model, 1)
        cancelled = pair.b.post(f"/v1/responses/{response_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
    assert pair.a.get(f"/v1/responses/{response_id}").json()["status"] == "cancelled"


def test_deleting_a_session_on_one_replica_cancels_its_turn_running_on_the_other(
    pair: Pair, served_model: ScriptedServerClient
) -> None:
    agent_id = create_agent(pair.a)
    session_id = create_session(pair.a, agent_id)
    with held_turn(pair.a, served_model, agent_id, session_id) as held:
        assert pair.b.delete(session_url(agent_id, session_id)).status_code == 200
        # a's stream ends, cancelled, while the model's answer is still held at the gate.
        last = list(held.frames)[-1][1]
    assert last["error"]["code"] == "cancelled", last
    assert_error(pair.a.get(session_url(agent_id, session_id)), 404)
    served_model.enqueue_text("a new session works")
    fresh = create_session(pair.a, agent_id)
    assert run_turn(pair.b, agent_id, fresh, "hi")["status"] == "completed"


def test_a_model_registered_on_one_replica_is_served_by_the_other(
    pair: Pair, served_model: ScriptedServerClient
) -> None:
    body = {"model_id": "team-alias", "provider_id": "remote", "provider_model_id": "scripted-model"}
    assert pair.a.post("/v1/models", json=body).status_code == 200
    # Every replica re-reads the registrations when told (through Redis) that they changed.
    wait_for(lambda: pair.b.get("/v1/models/team-alias").status_code == 200 or None, what="b to know the alias")
    agent_id = create_agent(pair.b, model="team-alias")
    served_model.enqueue_text("answered through the alias")
    turn = run_turn(pair.b, agent_id, create_session(pair.b, agent_id), "hi")
    assert turn["output_message"]["content"] == "answered through the alias"
    assert served_model.requests()[-1]["model"] == "scripted-model"
    assert pair.a.delete("/v1/models/team-alias").status_code == 200
    wait_for(lambda: pair.b.get("/v1/models/team-alias").status_code == 404 or None, what="b to forget the alias")


def test_a_resume_sent_the_moment_the_pause_arrives_continues_the_numbering(
    pair: Pair, served_model: ScriptedServerClient
) -> None:
    agent_id = create_agent(pair.a, client_tools=[WEATHER_TOOL])
    session_id = create_session(pair.a, agent_id)
    served_model.enqueue_tool_call("get_weather", {"city": "Oslo"})
    served_model.enqueue_text("Cold.")
    body = {"messages": [user("weather in Oslo?")], "stream": True}
    with pair.a.stream("POST", turn_url(agent_id, session_id), json=body) as response:
        first_run = []
        for frame in iter_frames(response):
            first_run.append(frame)
            if _kind(frame[1]) == "turn_awaiting_input":
                # Still inside a's stream: a may not have stored this run's events yet.
                turn = frame[1]["event"]["payload"]["turn"]
                [call] = turn["output_message"]["tool_calls"]
                resumed = resume(pair.b, agent_id, session_id, turn["turn_id"], [tool_response(call, "-5C")])
                assert resumed.status_code == 200, resumed.text
                assert resumed.json()["status"] == "completed"
    replay = list(_events(pair.a, turn_url(agent_id, session_id, turn["turn_id"])))
    ids = [frame_id for frame_id, _ in replay]
    assert ids == list(range(len(ids)))
    assert replay[: len(first_run)] == first_run
    kinds = [_kind(data) for _, data in replay]
    assert kinds.count("turn_start") == 2 and kinds[-1] == "turn_complete"


# The tests that kill a replica come last: each test after one waits while the killed replica starts again.


def test_when_a_replica_is_killed_mid_turn_the_other_fails_the_turn_and_keeps_what_completed(
    pair: Pair, served_model: ScriptedServerClient
) -> None:
    agent_id = create_agent(pair.a, toolgroups=["builtin::math"])
    session_id = create_session(pair.a, agent_id)
    served_model.enqueue_text("first answer")
    earlier = run_turn(pair.a, agent_id, session_id, "first")
    served_model.enqueue_tool_call("calculator", {"expression": "6 * 7"})
    with held_turn(pair.a, served_model, agent_id, session_id) as held:
        turn_id = held.turn_id
        wait_for_requests(served_model, 3)  # the earlier turn, the tool call, the held answer
        follower = _events(pair.b, turn_url(agent_id, session_id, turn_id))
        seen = [next(follower)]
        killed_at = time.monotonic()
        pair.procs[0].kill()
        seen.extend(follower)  # ends once b has failed the turn, rather than hanging
        failed = wait_for_status(pair.b, agent_id, session_id, turn_id, "failed")
    # Bounded: the lease, plus one beat, plus slack for a loaded machine.
    assert time.monotonic() - killed_at < LEASE_SECONDS * 4 + 5
    assert failed["error"]["code"] == "interrupted"
    assert [s["step_type"] for s in failed["steps"]] == ["inference", "tool_execution"]
    assert [r["content"] for r in failed["steps"][1]["tool_responses"]] == ["42"]
    ids = [frame_id for frame_id, _ in seen]
    assert ids == list(range(len(ids)))
    # The follower's stream ends with the turn's failure, and what a streamed before it died is
    # stored: a later replay, from either replica, gives the same frames.
    assert seen[-1][1]["error"]["code"] == "interrupted"
    assert [_kind(data) for _, data in seen].count("step_complete") == 2
    url = turn_url(agent_id, session_id, turn_id)
    assert list(_events(pair.b, url)) == seen
    # The session takes new turns, and the completed one is intact.
    served_model.enqueue_text("back again")
    assert run_turn(pair.b, agent_id, session_id, "again")["status"] == "completed"
    turns = pair.b.get(session_url(agent_id, session_id)).json()["turns"]
    assert [t["status"] for t in turns] == ["completed", "failed", "completed"]
    assert turns[0] == pair.b.get(turn_url(agent_id, session_id, earlier["turn_id"])).json()
    assert turns[0]["output_message"]["content"] == "first answer"


def test_when_a_replica_is_killed_mid_response_the_other_fails_it_and_ends_its_stream(
    pair: Pair, served_model: ScriptedServerClient
) -> None:
    gate = gate_name()
    served_model.enqueue(ScriptedReply(text="never delivered", gate=gate))
    with open_gate_finally(served_model, gate):
        started = pair.a.post("/v1/responses", json={"model": "scripted-model", "input": "hi", "background": True})
        response_id = started.json()["id"]
        wait_for_requests(served_model, 1)
        params = {"stream": "true"}
        with pair.b.stream("GET", f"/v1/responses/{response_id}", params=params) as followed:
            stream = frames(followed)
            head = _response_events(stream, 2)
            pair.procs[0].kill()
            tail = _response_events(stream, None)
    events = head + tail
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert [event["type"] for event in events] == ["response.created", "response.in_progress", "response.failed"]
    assert events[-1]["response"]["error"]["code"] == "interrupted"
    stored = pair.b.get(f"/v1/responses/{response_id}").json()
    assert (stored["status"], stored["error"]["code"]) == ("failed", "interrupted")
    with pair.b.stream("GET", f"/v1/responses/{response_id}", params=params) as replayed:
        assert _response_events(frames(replayed), None) == events
