"""Forking while the original is deleted, and deletes at once: a fork either shares whole or is refused (409).

The delete marks the original, then lists its forks; a fork writes its lineage, then reads the mark
(``services/forks.py``). Each test holds one side at a chosen write (a spy on the store that waits on an
event) and runs the other through; every storage backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from fork_app import WAIT_SECONDS, App, app_fixture, texts  # noqa: F401  (fixtures)
from integration_helpers import assert_error, session_url
from store_records import sessions_of

from ferryman.services.forks import HELD_AGENT
from ferryman.storage.domain.forks import Lineages
from ferryman.testing import ScriptedReply
from inprocess import agent_and_session

pytestmark = pytest.mark.anyio


class Gate:
    """Holds calls of a store method whose first argument ``match`` accepts, until opened."""

    def __init__(self, app: App, method: str, match: Callable[..., bool]) -> None:
        self.reached, self.opened = asyncio.Event(), asyncio.Event()
        real: Callable[..., Awaitable[Any]] = getattr(app.store, method)

        async def held(*args: Any, **kwargs: Any) -> Any:
            if match(*args):
                self.reached.set()
                await self.opened.wait()
            return await real(*args, **kwargs)

        setattr(app.store, method, held)

    async def wait(self) -> None:
        async with asyncio.timeout(WAIT_SECONDS):
            await self.reached.wait()


async def _answer(request: Awaitable[httpx.Response]) -> httpx.Response:
    """A request's answer, in time (a side held at a gate it should not reach would wait forever)."""
    async with asyncio.timeout(WAIT_SECONDS):
        return await request


async def _session_with_turns(app: App, *questions: str) -> tuple[str, str, list[str]]:
    agent_id, session_id = await agent_and_session(app.http)
    turn_ids = []
    for question in questions:
        app.script.enqueue(ScriptedReply(text=f"re: {question}"))
        turn_ids.append((await app.turn(agent_id, session_id, question))["turn_id"])
    return agent_id, session_id, turn_ids


def _inputs(session: dict[str, Any]) -> list[str]:
    return [turn["input_messages"][0]["content"] for turn in session["turns"]]


async def test_a_fork_made_while_its_original_is_deleted_is_refused(app: App) -> None:
    agent_id, session_id, turn_ids = await _session_with_turns(app, "a", "b")
    gate = Gate(app, "delete_session", lambda _agent, session: session == session_id)
    deleting = asyncio.ensure_future(app.http.delete(session_url(agent_id, session_id)))
    await gate.wait()  # its forks were given a holder; the original is not deleted yet
    late = await _answer(app.http.post(f"{session_url(agent_id, session_id)}/fork", json={"turn_id": turn_ids[0]}))
    assert_error(late, 409, "conflict")
    gate.opened.set()
    assert (await _answer(deleting)).status_code == 200
    assert [lineage.id for lineage in (await Lineages(app.store.kernel).records.page(parent="")).items] == []
    assert (await sessions_of(app.store, HELD_AGENT)).items == [], "a refused fork leaves no holder"


async def test_a_fork_being_made_when_its_original_is_deleted_keeps_what_it_shares(app: App) -> None:
    agent_id, session_id, turn_ids = await _session_with_turns(app, "a", "b")
    made = Gate(app, "create_session", lambda record: record.agent_id == agent_id)
    forking = asyncio.ensure_future(
        app.http.post(f"{session_url(agent_id, session_id)}/fork", json={"turn_id": turn_ids[0]})
    )
    await made.wait()  # its lineage is written, its session not yet
    assert (await _answer(app.http.delete(session_url(agent_id, session_id)))).status_code == 200
    made.opened.set()
    forked = await _answer(forking)
    assert forked.status_code == 200, forked.text
    fork_id = forked.json()["session_id"]
    assert _inputs(await app.session(agent_id, fork_id)) == ["a"]
    app.script.enqueue(ScriptedReply(text="re: c"))
    await app.turn(agent_id, fork_id, "c")
    assert texts(await app.prompt(3)) == ["a", "re: a", "c"]


async def test_a_fork_whose_lineage_went_before_its_session_was_written_is_undone(app: App) -> None:
    agent_id, session_id, turn_ids = await _session_with_turns(app, "a")
    lineages = Lineages(app.store.kernel)
    made = Gate(app, "create_session", lambda record: record.agent_id == agent_id)
    forking = asyncio.ensure_future(
        app.http.post(f"{session_url(agent_id, session_id)}/fork", json={"turn_id": turn_ids[0]})
    )
    await made.wait()
    (lineage,) = (await lineages.records.page(parent="")).items
    await lineages.delete(lineage.id)  # as a sweep of lineages without a session would
    made.opened.set()
    assert_error(await _answer(forking), 409, "conflict")
    assert [s["session_id"] for s in (await app.http.get(f"/v1/agents/{agent_id}/sessions")).json()["data"]] == [
        session_id
    ]


async def test_a_second_delete_at_once_is_refused_and_one_holder_is_made(app: App) -> None:
    agent_id, session_id, turn_ids = await _session_with_turns(app, "a")
    forked = await app.http.post(f"{session_url(agent_id, session_id)}/fork", json={"turn_id": turn_ids[0]})
    fork_id = forked.json()["session_id"]
    gate = Gate(app, "delete_session", lambda _agent, session: session == session_id)
    first = asyncio.ensure_future(app.http.delete(session_url(agent_id, session_id)))
    await gate.wait()
    assert_error(await _answer(app.http.delete(session_url(agent_id, session_id))), 409, "conflict")
    gate.opened.set()
    assert (await _answer(first)).status_code == 200
    (holder,) = (await sessions_of(app.store, HELD_AGENT)).items
    assert (await Lineages(app.store.kernel).find(fork_id)).source == holder.session_id  # type: ignore[union-attr]
    assert (await app.http.delete(session_url(agent_id, fork_id))).status_code == 200
    assert (await sessions_of(app.store, HELD_AGENT)).items == []


async def test_a_conversation_forked_while_it_is_deleted_is_refused(app: App) -> None:
    http = app.http
    conversation = (await http.post("/v1/conversations", json={})).json()["id"]
    items = {"items": [{"type": "message", "role": "user", "content": text} for text in ("one", "two")]}
    added = (await http.post(f"/v1/conversations/{conversation}/items", json=items)).json()["data"]
    gate = Gate(app, "delete_conversation", lambda conversation_id: conversation_id == conversation)
    deleting = asyncio.ensure_future(http.delete(f"/v1/conversations/{conversation}"))
    await gate.wait()
    late = await _answer(http.post(f"/v1/conversations/{conversation}/fork", json={"item_id": added[1]["id"]}))
    assert_error(late, 409, "conflict")
    gate.opened.set()
    assert (await _answer(deleting)).status_code == 200
    assert [lineage.id for lineage in (await Lineages(app.store.kernel).records.page(parent="")).items] == []


async def test_a_conversation_fork_being_made_when_its_original_is_deleted_keeps_its_items(app: App) -> None:
    http = app.http
    conversation = (await http.post("/v1/conversations", json={})).json()["id"]
    items = {"items": [{"type": "message", "role": "user", "content": text} for text in ("one", "two")]}
    added = (await http.post(f"/v1/conversations/{conversation}/items", json=items)).json()["data"]
    made = Gate(app, "create_conversation", lambda record, *_: record.conversation_id != conversation)
    forking = asyncio.ensure_future(
        http.post(f"/v1/conversations/{conversation}/fork", json={"item_id": added[1]["id"]})
    )
    await made.wait()
    assert (await _answer(http.delete(f"/v1/conversations/{conversation}"))).status_code == 200
    made.opened.set()
    forked = await _answer(forking)
    assert forked.status_code == 200, forked.text
    page = (await http.get(f"/v1/conversations/{forked.json()['id']}/items", params={"order": "asc"})).json()
    assert [item["content"][0]["text"] for item in page["data"]] == ["one", "two"]
