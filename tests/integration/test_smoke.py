"""The shortest end-to-end path: one non-streaming turn over real HTTP."""

from __future__ import annotations

import httpx

from inprocess import Served
from support import create_agent, create_session


def test_health(http: httpx.Client) -> None:
    assert http.get("/v1/health").json() == {"status": "OK"}


def test_non_streaming_turn_returns_the_answer(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    model.enqueue_text("hello there")
    response = http.post(
        f"/v1/agents/{agent_id}/session/{session_id}/turn",
        json={"messages": [{"role": "user", "content": "hi"}], "stream": False},
    )
    assert response.status_code == 200, response.text
    turn = response.json()
    assert turn["output_message"]["content"] == "hello there"
    assert turn["status"] == "completed"
    assert [step["step_type"] for step in turn["steps"]] == ["inference"]
