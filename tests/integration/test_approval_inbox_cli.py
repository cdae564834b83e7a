"""The approval inbox from the SDK (``client.approvals``, sync and async) and the CLI (``ferryman approvals``)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from cli_support import cli
from integration_helpers import run_turn, turn_url

from ferryman.client import AsyncClient, Client
from ferryman.testing import ScriptedServerClient
from support import create_agent, create_session


def _paused(http: httpx.Client, model: ScriptedServerClient, expression: str) -> tuple[str, str, dict[str, Any]]:
    agent_id = create_agent(http, toolgroups=["builtin::math"], require_approval="always")
    session_id = create_session(http, agent_id)
    model.enqueue_tool_call("calculator", {"expression": expression})
    turn = run_turn(http, agent_id, session_id, f"{expression}?")
    assert turn["status"] == "awaiting_input"
    return agent_id, session_id, turn


def _followed(http: httpx.Client, agent_id: str, session_id: str, turn_id: str) -> dict[str, Any]:
    """The turn once its event stream (followed to its end) ends."""
    url = turn_url(agent_id, session_id, turn_id)
    with http.stream("GET", f"{url}/events") as events:
        for _ in events.iter_lines():
            pass
    turn: dict[str, Any] = http.get(url).json()
    return turn


def test_the_cli_lists_and_approves_a_waiting_call(
    capsys: pytest.CaptureFixture[str], served_base_url: str, served_model: ScriptedServerClient
) -> None:
    with httpx.Client(base_url=served_base_url, timeout=30) as http:
        agent_id, session_id, turn = _paused(http, served_model, "20 + 22")
        listed = cli(capsys, served_base_url, "approvals", "list", "--agent", agent_id, "--json").json()
        [held] = listed
        assert (held["tool_name"], held["arguments"], held["turn_id"]) == (
            "calculator",
            {"expression": "20 + 22"},
            turn["turn_id"],
        )
        table = cli(capsys, served_base_url, "approvals", "list", "--agent", agent_id)
        assert table.code == 0 and held["id"] in table.out and "calculator" in table.out

        served_model.enqueue_text("42.")
        approved = cli(capsys, served_base_url, "approvals", "approve", held["id"], "--json").json()
        assert (approved["id"], approved["status"]) == (held["id"], "approved")
        done = _followed(http, agent_id, session_id, turn["turn_id"])
        assert done["status"] == "completed"
        [tool_step] = [s for s in done["steps"] if s["step_type"] == "tool_execution"]
        assert [r["content"] for r in tool_step["tool_responses"]] == ["42"]

        assert cli(capsys, served_base_url, "approvals", "list", "--agent", agent_id, "--json").json() == []
        again = cli(capsys, served_base_url, "approvals", "deny", held["id"])
        assert again.code != 0 and "already decided" in again.err


def test_the_sdk_lists_and_denies_a_waiting_call(served_base_url: str, served_model: ScriptedServerClient) -> None:
    with httpx.Client(base_url=served_base_url, timeout=30) as http, Client(served_base_url) as client:
        agent_id, session_id, turn = _paused(http, served_model, "1 + 1")
        [held] = list(client.approvals.list(agent_id=agent_id, source="turn"))
        assert held.status == "pending" and held.turn_id == turn["turn_id"]
        served_model.enqueue_text("Fine, no maths.")
        denied = client.approvals.deny(held.id, reason="not now")
        assert (denied.status, denied.reason) == ("denied", "not now")
        done = _followed(http, agent_id, session_id, turn["turn_id"])
        [tool_step] = [s for s in done["steps"] if s["step_type"] == "tool_execution"]
        assert [r["content"] for r in tool_step["tool_responses"]] == ["the user denied this call: not now"]
        assert list(client.approvals.list(agent_id=agent_id)) == []


@pytest.mark.anyio
async def test_the_async_sdk_pages_and_approves(served_base_url: str, served_model: ScriptedServerClient) -> None:
    with httpx.Client(base_url=served_base_url, timeout=30) as http:
        agent_id = create_agent(http, toolgroups=["builtin::math"], require_approval="always")
        turns = []
        for n in range(3):
            session_id = create_session(http, agent_id)
            served_model.enqueue_tool_call("calculator", {"expression": f"{n} + 1"})
            turns.append((session_id, run_turn(http, agent_id, session_id, "sum?")["turn_id"]))
        async with AsyncClient(served_base_url) as client:
            page = await client.approvals.list(agent_id=agent_id, limit=2, order="asc")
            assert [a.turn_id for a in page.data] == [t for _, t in turns[:2]]
            every = [approval async for approval in page]
            assert [a.turn_id for a in every] == [t for _, t in turns]
            served_model.enqueue_text("1.")
            approved = await client.approvals.approve(every[0].id)
            assert approved.status == "approved"
            assert _followed(http, agent_id, turns[0][0], turns[0][1])["status"] == "completed"
            left = await client.approvals.list(agent_id=agent_id)
            assert [a.turn_id for a in left.data] == [turns[2][1], turns[1][1]]
