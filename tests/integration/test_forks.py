"""Forks: a session forked at a middle turn, a conversation forked at a middle item (issue #27, item 2).

The fork's next turn (or response) sees only the history up to the fork point: the
scripted model's prompt says so. The original is untouched, and keeps growing on its own.
Each test runs on every storage backend.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, cast

import pytest
from fork_app import App, app_fixture, texts  # noqa: F401  (fixtures)
from integration_helpers import assert_error, session_url, tool_response, turn_url

from ferryman.api.content import Message
from ferryman.auth.policy import AccessPolicy
from ferryman.errors import ConflictError
from ferryman.ids import utcnow
from ferryman.services.access import Access
from ferryman.services.fork_reads import ForkReads
from ferryman.services.forks import SessionForks
from ferryman.services.record_guard import RecordGuard
from ferryman.services.session_reads import SessionReads
from ferryman.storage.base import Store
from ferryman.storage.domain.forks import Lineages
from ferryman.testing import ScriptedReply
from ferryman.testing.scripted import ScriptedToolCall
from inprocess import agent_and_session
from support import WEATHER_TOOL

pytestmark = pytest.mark.anyio

WAIT_SECONDS = 20


async def _paused_agent(app: App) -> tuple[str, str, dict[str, Any]]:
    """An agent with a client tool, a session of it, and its first turn, paused on a weather call."""
    created = await app.http.post(
        "/v1/agents",
        json={"agent_config": {"model": "scripted-model", "instructions": "-", "client_tools": [WEATHER_TOOL]}},
    )
    assert created.status_code == 200, created.text
    agent_id = created.json()["agent_id"]
    session = await app.http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
    session_id = session.json()["session_id"]
    app.script.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Paris"})]))
    paused = await app.turn(agent_id, session_id, "weather?")
    assert paused["status"] == "awaiting_input"
    return agent_id, session_id, paused


async def test_a_session_forked_at_a_middle_turn_continues_from_that_turn_only(app: App) -> None:
    http = app.http
    agent_id, session_id = await agent_and_session(http)
    turns = []
    for n in range(3):
        app.script.enqueue(ScriptedReply(text=f"answer {n}"))
        turns.append(await app.turn(agent_id, session_id, f"question {n}"))

    forked = await http.post(f"{session_url(agent_id, session_id)}/fork", json={"turn_id": turns[1]["turn_id"]})
    assert forked.status_code == 200, forked.text
    fork_id = forked.json()["session_id"]
    assert fork_id != session_id

    fork = await app.session(agent_id, fork_id)
    assert fork["session_name"] == "s"
    assert [t["input_messages"][0]["content"] for t in fork["turns"]] == ["question 0", "question 1"]
    assert [t["output_message"]["content"] for t in fork["turns"]] == ["answer 0", "answer 1"]
    assert [t["status"] for t in fork["turns"]] == ["completed", "completed"]
    assert [t["turn_id"] for t in fork["turns"]] == [t["turn_id"] for t in turns[:2]], "shared, under their ids"
    assert {t["session_id"] for t in fork["turns"]} == {session_id}, "shared turns name the session holding them"
    assert await app.store.list_turns([fork_id]) == [], "the fork holds no turn of its own: nothing was copied"
    shared = fork["turns"][0]
    step = await http.get(f"{turn_url(agent_id, fork_id, shared['turn_id'])}/step/{shared['steps'][0]['step_id']}")
    assert step.status_code == 200 and step.json()["step"]["turn_id"] == shared["turn_id"]
    read = await http.get(turn_url(agent_id, fork_id, shared["turn_id"]))
    assert read.status_code == 200 and read.json() == turns[0]
    later = await http.get(turn_url(agent_id, fork_id, turns[2]["turn_id"]))
    assert_error(later, 404, "not_found")  # after the fork point: the original's alone

    app.script.enqueue(ScriptedReply(text="forked answer"))
    await app.turn(agent_id, fork_id, "question in the fork")
    assert texts(await app.prompt(4)) == ["question 0", "answer 0", "question 1", "answer 1", "question in the fork"]

    # The original is untouched by the fork and by the fork's new turn.
    app.script.enqueue(ScriptedReply(text="original answer"))
    await app.turn(agent_id, session_id, "question 3")
    expected = [*(t for n in range(3) for t in (f"question {n}", f"answer {n}")), "question 3"]
    assert texts(await app.prompt(5)) == expected
    assert len((await app.session(agent_id, session_id))["turns"]) == 4
    assert len((await app.session(agent_id, fork_id))["turns"]) == 3


async def test_a_fork_keeps_a_paused_turn_resumable_in_the_fork(app: App) -> None:
    http = app.http
    agent_id, session_id, paused = await _paused_agent(app)

    forked = await http.post(f"{session_url(agent_id, session_id)}/fork", json={"turn_id": paused["turn_id"]})
    assert forked.status_code == 200, forked.text
    fork_id = forked.json()["session_id"]
    copy = (await app.session(agent_id, fork_id))["turns"][0]
    assert copy["status"] == "awaiting_input"
    call = copy["output_message"]["tool_calls"][0]
    assert call == paused["output_message"]["tool_calls"][0]
    app.script.enqueue(ScriptedReply(text="sunny in the fork"))
    answer = await http.post(
        f"{turn_url(agent_id, fork_id, copy['turn_id'])}/resume",
        json={"tool_responses": [tool_response(call, "sunny")], "stream": False},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "completed"
    assert [m["role"] for m in (await app.prompt(2))["messages"]][-3:] == ["user", "assistant", "tool"]
    # The original still waits for its own answer.
    original = await http.get(turn_url(agent_id, session_id, paused["turn_id"]))
    assert original.json()["status"] == "awaiting_input"


async def test_a_fork_of_a_turn_paused_for_approval_holds_its_copy_in_the_inbox(app: App) -> None:
    http = app.http
    config = {"model": "scripted-model", "instructions": "-", "toolgroups": ["builtin::math"]}
    created = await http.post("/v1/agents", json={"agent_config": {**config, "require_approval": "always"}})
    agent_id = created.json()["agent_id"]
    session_id = (await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})).json()["session_id"]
    call = ScriptedToolCall(name="calculator", arguments={"expression": "6 * 7"})
    app.script.enqueue(ScriptedReply(tool_calls=[call]))
    paused = await app.turn(agent_id, session_id, "6 * 7?")
    assert paused["status"] == "awaiting_input"

    forked = await http.post(f"{session_url(agent_id, session_id)}/fork", json={"turn_id": paused["turn_id"]})
    assert forked.status_code == 200, forked.text
    fork_id = forked.json()["session_id"]
    copy = (await app.session(agent_id, fork_id))["turns"][0]
    held = {a["session_id"]: a for a in (await http.get("/v1/approvals")).json()["data"]}
    assert sorted(held) == sorted([session_id, fork_id]), held
    assert (held[fork_id]["turn_id"], held[fork_id]["arguments"]) == (copy["turn_id"], {"expression": "6 * 7"})

    app.script.enqueue(ScriptedReply(text="42 in the fork"))
    decided = await http.post(f"/v1/approvals/{held[fork_id]['id']}/approve")
    assert decided.status_code == 202, decided.text
    async with http.stream("GET", f"{turn_url(agent_id, fork_id, copy['turn_id'])}/events") as events:
        async for _ in events.aiter_lines():  # the continued turn's stream, followed to its end
            pass
    done = (await http.get(turn_url(agent_id, fork_id, copy["turn_id"]))).json()
    assert (done["status"], done["output_message"]["content"]) == ("completed", "42 in the fork")
    original = (await http.get(turn_url(agent_id, session_id, paused["turn_id"]))).json()
    assert original["status"] == "awaiting_input", "the original still waits for its own decision"
    assert [a["id"] for a in (await http.get("/v1/approvals")).json()["data"]] == [held[session_id]["id"]]


async def test_a_fork_of_a_missing_turn_or_item_is_not_found(app: App) -> None:
    http = app.http
    agent_id, session_id = await agent_and_session(http)
    assert_error(
        await http.post(f"{session_url(agent_id, session_id)}/fork", json={"turn_id": "nope"}), 404, "not_found"
    )
    assert_error(await http.post(f"{session_url(agent_id, 'nope')}/fork", json={"turn_id": "nope"}), 404, "not_found")
    conversation = (await http.post("/v1/conversations", json={})).json()
    missing = await http.post(f"/v1/conversations/{conversation['id']}/fork", json={"item_id": "x"})
    assert_error(missing, 404, "not_found")
    assert_error(await http.post("/v1/conversations/conv_nope/fork", json={"item_id": "x"}), 404, "not_found")
    assert_error(await http.post(f"{session_url(agent_id, session_id)}/fork", json={}), 400)


async def test_a_conversation_forked_at_a_middle_item_continues_from_that_item_only(app: App) -> None:
    http = app.http
    conversation = (await http.post("/v1/conversations", json={"metadata": {"topic": "t"}})).json()
    for n in range(3):
        app.script.enqueue(ScriptedReply(text=f"answer {n}"))
        created = await http.post(
            "/v1/responses",
            json={"model": "scripted-model", "input": f"question {n}", "conversation": conversation["id"]},
        )
        assert created.status_code == 200, created.text
    listed = await http.get(f"/v1/conversations/{conversation['id']}/items", params={"order": "asc"})
    items = listed.json()["data"]
    assert len(items) == 6
    middle = items[3]  # the answer to question 1

    forked = await http.post(f"/v1/conversations/{conversation['id']}/fork", json={"item_id": middle["id"]})
    assert forked.status_code == 200, forked.text
    fork = forked.json()
    assert fork["id"] != conversation["id"] and fork["metadata"] == {"topic": "t"}
    kept = await http.get(f"/v1/conversations/{fork['id']}/items", params={"order": "asc"})
    assert kept.json()["data"] == items[:4]

    app.script.enqueue(ScriptedReply(text="forked answer"))
    created = await http.post(
        "/v1/responses", json={"model": "scripted-model", "input": "question in the fork", "conversation": fork["id"]}
    )
    assert created.status_code == 200, created.text
    assert texts(await app.prompt(4)) == ["question 0", "answer 0", "question 1", "answer 1", "question in the fork"]
    assert len((await http.get(f"/v1/conversations/{conversation['id']}/items")).json()["data"]) == 6
    assert len((await http.get(f"/v1/conversations/{fork['id']}/items")).json()["data"]) == 6

    renamed = await http.post(
        f"/v1/conversations/{conversation['id']}/fork", json={"item_id": items[0]["id"], "metadata": {"k": "v"}}
    )
    assert renamed.json()["metadata"] == {"k": "v"}


async def test_a_fork_refuses_a_turn_that_still_runs(app: App) -> None:
    http = app.http
    agent_id, session_id = await agent_and_session(http)
    app.script.enqueue(ScriptedReply(text="slow", gate="fork-running"))
    running = asyncio.create_task(app.turn(agent_id, session_id, "q"))
    try:
        await app.prompt(1)
        turn_id = (await app.session(agent_id, session_id))["turns"][0]["turn_id"]
        refused = await http.post(f"{session_url(agent_id, session_id)}/fork", json={"turn_id": turn_id})
        assert_error(refused, 409, "conflict")
    finally:
        app.script.open_gate("fork-running")
        async with asyncio.timeout(WAIT_SECONDS):
            finished = await running
    assert finished["status"] == "completed"


class _ResumedWhileRead:
    """The store, but a paused turn is resumed (claimed to run again) just after the fork read the messages."""

    def __init__(self, store: Store, turn_id: str) -> None:
        self._store, self._turn_id = store, turn_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def turn_messages(self, session_id: str, turn_ids: list[str]) -> dict[str, list[Message]]:
        read = await self._store.turn_messages(session_id, turn_ids)
        await self._store.claim_resume(session_id, self._turn_id, utcnow() + timedelta(minutes=1))
        return read


async def test_a_fork_refuses_a_kept_turn_resumed_while_it_is_read(app: App) -> None:
    agent_id, session_id, paused = await _paused_agent(app)
    resumed_meanwhile = cast(Store, _ResumedWhileRead(app.store, paused["turn_id"]))
    reads = ForkReads(resumed_meanwhile, Lineages(app.store.kernel))
    sessions = SessionReads(app.store.kernel, Access(AccessPolicy()))
    forks = SessionForks(
        resumed_meanwhile,
        RecordGuard(resumed_meanwhile, Access(AccessPolicy())),
        reads,
        lambda: utcnow() + timedelta(minutes=1),
        sessions,
    )
    with pytest.raises(ConflictError, match="changed while"):
        await forks.fork_session(agent_id, session_id, paused["turn_id"], None)
    sessions = await app.http.get(f"/v1/agents/{agent_id}/sessions")
    assert [s["session_id"] for s in sessions.json()["data"]] == [session_id], "a refused fork leaves no session"
    assert (await app.session(agent_id, session_id))["turns"][0]["status"] == "in_progress"
