"""Replaying a turn's events by Last-Event-ID: finished, running, and across a pause."""

from __future__ import annotations

from typing import Any

import httpx
from integration_helpers import gate_name, iter_frames, open_gate_finally, turn_url, user, wait_for_requests

from ferryman.testing import ScriptedReply, ScriptedToolCall
from inprocess import Served
from support import WEATHER_TOOL, create_agent, create_session


def _stream(http: httpx.Client, url: str, body: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    with http.stream("POST", url, json={**body, "stream": True}) as response:
        return list(iter_frames(response))


def _replay(http: httpx.Client, url: str, last_event_id: int | None = None) -> list[tuple[int, dict[str, Any]]]:
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    with http.stream("GET", f"{url}/events", headers=headers) as response:
        assert response.status_code == 200, response.read().decode()
        return list(iter_frames(response))


def _kind(data: dict[str, Any]) -> str:
    return "error" if "error" in data else str(data["event"]["payload"]["event_type"])


def test_a_finished_turn_replays_exactly_the_missed_events(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    model.enqueue_text("one two three")
    live = _stream(http, turn_url(agent_id, session_id), {"messages": [user("hi")]})
    turn_id = live[0][1]["event"]["payload"]["turn_id"]
    url = turn_url(agent_id, session_id, turn_id)
    assert _replay(http, url) == live
    assert _replay(http, url, 2) == live[3:]
    assert _replay(http, url, live[-1][0]) == []


def test_a_client_reconnects_to_a_running_turn_and_misses_nothing(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    gate = gate_name()
    model.enqueue(ScriptedReply(text="held answer", gate=gate))
    with open_gate_finally(model, gate):
        with http.stream("POST", turn_url(agent_id, session_id), json={"messages": [user("hi")], "stream": True}) as r:
            frames = iter_frames(r)
            first = [next(frames), next(frames)]
        wait_for_requests(model, 1)
        turn_id = first[0][1]["event"]["payload"]["turn_id"]
        url = turn_url(agent_id, session_id, turn_id)
        with http.stream("GET", f"{url}/events", headers={"Last-Event-ID": str(first[-1][0])}) as response:
            model.open_gate(gate)
            rest = list(iter_frames(response))
    ids = [frame_id for frame_id, _ in first + rest]
    assert ids == list(range(len(ids)))
    assert _kind(rest[-1][1]) == "turn_complete"
    assert _replay(http, url) == first + rest


def test_event_ids_run_on_across_a_pause_and_resume(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"}, call_id="c1")])
    )
    paused = _stream(http, turn_url(agent_id, session_id), {"messages": [user("weather?")]})
    assert _kind(paused[-1][1]) == "turn_awaiting_input"
    turn_id = paused[0][1]["event"]["payload"]["turn_id"]
    url = turn_url(agent_id, session_id, turn_id)
    model.enqueue_text("cold")
    body = {"tool_responses": [{"call_id": "c1", "tool_name": "get_weather", "content": "-3C"}]}
    resumed = _stream(http, f"{url}/resume", body)
    assert resumed[0][0] == paused[-1][0] + 1
    everything = _replay(http, url)
    assert everything == paused + resumed
    assert [frame_id for frame_id, _ in everything] == list(range(len(everything)))
    assert _replay(http, url, paused[-1][0]) == resumed


def test_events_of_an_unknown_turn_are_a_404_and_a_bad_header_a_400(http: httpx.Client) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    assert http.get(f"{turn_url(agent_id, session_id, 'nope')}/events").status_code == 404
    bad = http.get(f"{turn_url(agent_id, session_id, 'nope')}/events", headers={"Last-Event-ID": "x"})
    assert bad.status_code == 400
