"""``Idempotency-Key`` through a real server process: a streamed run replayed over uvicorn, bounded to its run."""

from __future__ import annotations

from typing import Any

import httpx
from integration_helpers import iter_frames, turn_url, user

from ferryman.testing import ScriptedReply, ScriptedToolCall
from inprocess import Served
from support import WEATHER_TOOL, create_agent, create_session


def _stream(http: httpx.Client, url: str, body: dict[str, Any], key: str) -> tuple[list[tuple[int, Any]], bool]:
    with http.stream("POST", url, json={**body, "stream": True}, headers={"Idempotency-Key": key}) as response:
        assert response.status_code == 200, response.read().decode()
        return list(iter_frames(response)), response.headers.get("idempotent-replayed") == "true"


def test_a_paused_run_is_replayed_alone_after_its_turn_was_resumed(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
    session_id = create_session(http, agent_id)
    model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"}, call_id="c1")])
    )
    model.enqueue_text("cold")
    body = {"messages": [user("weather?")]}
    paused, replayed = _stream(http, turn_url(agent_id, session_id), body, "paused-run")
    assert not replayed
    turn_id = paused[0][1]["event"]["payload"]["turn_id"]
    resume = {"tool_responses": [{"call_id": "c1", "tool_name": "get_weather", "content": "-3C"}]}
    resumed, _ = _stream(http, f"{turn_url(agent_id, session_id, turn_id)}/resume", resume, "resumed-run")

    assert _stream(http, turn_url(agent_id, session_id), body, "paused-run") == (paused, True)
    assert _stream(http, f"{turn_url(agent_id, session_id, turn_id)}/resume", resume, "resumed-run") == (resumed, True)
    assert len(model.requests()) == 2
