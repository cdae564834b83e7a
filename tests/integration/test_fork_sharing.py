"""Forks share what they keep (issue #27, item 2): nothing is copied, forks of forks read through, and deleting an
original (or an item it shares) leaves its forks whole. Each test runs on every storage backend."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pytest
from fork_app import App, app_fixture, texts  # noqa: F401  (fixtures)
from integration_helpers import assert_error, session_url, turn_url
from store_records import sessions_of

from ferryman.auth.policy import AccessPolicy
from ferryman.auth.principal import acting_as
from ferryman.errors import NotFoundError
from ferryman.ids import utcnow
from ferryman.services.access import Access
from ferryman.services.conversation_forks import HELD_ITEMS
from ferryman.services.fork_reads import ForkReads
from ferryman.services.forks import HELD_AGENT, SessionForks
from ferryman.services.record_guard import RecordGuard
from ferryman.services.session_reads import SessionReads
from ferryman.storage.base import KeySettlement, SessionRecord, Store
from ferryman.storage.domain.forks import Lineages
from ferryman.storage.kernel.model import Owner
from ferryman.testing import ScriptedReply
from ferryman.testing.scripted import ScriptedToolCall
from inprocess import agent_and_session

pytestmark = pytest.mark.anyio


async def _turns(app: App, agent_id: str, session_id: str, *questions: str) -> list[dict[str, Any]]:
    done = []
    for question in questions:
        app.script.enqueue(ScriptedReply(text=f"re: {question}"))
        done.append(await app.turn(agent_id, session_id, question))
    return done


async def _fork(app: App, agent_id: str, session_id: str, turn_id: str) -> str:
    forked = await app.http.post(f"{session_url(agent_id, session_id)}/fork", json={"turn_id": turn_id})
    assert forked.status_code == 200, forked.text
    return str(forked.json()["session_id"])


def _inputs(session: dict[str, Any]) -> list[str]:
    return [turn["input_messages"][0]["content"] for turn in session["turns"]]


async def _lineages(app: App) -> list[str]:
    return [lineage.id for lineage in (await Lineages(app.store.kernel).records.page(parent="")).items]


async def test_a_fork_of_a_fork_reads_both_histories_and_copies_nothing(app: App) -> None:
    agent_id, session_id = await agent_and_session(app.http)
    original = await _turns(app, agent_id, session_id, "a", "b", "c")
    first = await _fork(app, agent_id, session_id, original[1]["turn_id"])
    assert await app.store.list_turns([first]) == [], "nothing copied"
    own = await _turns(app, agent_id, first, "d", "e")
    assert texts(await app.prompt(4)) == ["a", "re: a", "b", "re: b", "d"]

    second = await _fork(app, agent_id, first, own[0]["turn_id"])
    assert await app.store.list_turns([second]) == []
    listing = await app.session(agent_id, second)
    assert _inputs(listing) == ["a", "b", "d"]
    assert [t["session_id"] for t in listing["turns"]] == [session_id, session_id, first]
    await _turns(app, agent_id, second, "f")
    assert texts(await app.prompt(6)) == ["a", "re: a", "b", "re: b", "d", "re: d", "f"]
    sessions = (await app.http.get(f"/v1/agents/{agent_id}/sessions")).json()["data"]
    assert {s["session_id"]: _inputs(s) for s in sessions} == {
        session_id: ["a", "b", "c"],
        first: ["a", "b", "d", "e"],
        second: ["a", "b", "d", "f"],
    }
    only = await app.http.get(session_url(agent_id, second), params={"turn_ids": original[0]["turn_id"]})
    assert _inputs(only.json()) == ["a"]
    events = await app.http.get(f"{turn_url(agent_id, second, original[0]['turn_id'])}/events")
    assert events.status_code == 200 and '"turn_complete"' in events.text, "a shared turn's events are its original's"
    assert_error(await app.http.get(f"{turn_url(agent_id, second, original[2]['turn_id'])}/events"), 404, "not_found")


async def test_deleting_the_original_keeps_its_forks_whole_and_the_holder_goes_with_the_last(app: App) -> None:
    http = app.http
    agent_id, session_id = await agent_and_session(http)
    original = await _turns(app, agent_id, session_id, "a", "b", "c")
    fork = await _fork(app, agent_id, session_id, original[1]["turn_id"])
    await _turns(app, agent_id, fork, "d")
    grandchild = await _fork(app, agent_id, fork, original[0]["turn_id"])  # shares only what the fork shares

    assert (await http.delete(session_url(agent_id, session_id))).status_code == 200
    assert _inputs(await app.session(agent_id, fork)) == ["a", "b", "d"]
    assert _inputs(await app.session(agent_id, grandchild)) == ["a"]
    await _turns(app, agent_id, fork, "e")
    assert texts(await app.prompt(5)) == ["a", "re: a", "b", "re: b", "d", "re: d", "e"]
    sessions = (await http.get(f"/v1/agents/{agent_id}/sessions")).json()["data"]
    assert sorted(s["session_id"] for s in sessions) == sorted([fork, grandchild]), "the holder is listed nowhere"

    assert (await http.delete(session_url(agent_id, fork))).status_code == 200
    assert _inputs(await app.session(agent_id, grandchild)) == ["a"]
    await _turns(app, agent_id, grandchild, "g")
    assert texts(await app.prompt(6)) == ["a", "re: a", "g"]
    holders = await _lineages(app)
    assert holders and grandchild in holders
    assert (await http.delete(session_url(agent_id, grandchild))).status_code == 200
    assert await _lineages(app) == [], "no fork shares the holders now: they went"
    with acting_as(None):
        assert (await sessions_of(app.store, HELD_AGENT)).items == []


async def test_a_paused_kept_turn_is_copied_the_ended_ones_shared_and_a_decision_continues_the_fork(app: App) -> None:
    http = app.http
    config = {"model": "scripted-model", "instructions": "-", "toolgroups": ["builtin::math"]}
    created = await http.post("/v1/agents", json={"agent_config": {**config, "require_approval": "always"}})
    agent_id = created.json()["agent_id"]
    session_id = (await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})).json()["session_id"]
    first = (await _turns(app, agent_id, session_id, "hello"))[0]
    app.script.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="calculator", arguments={"expression": "6*7"})]))
    paused = await app.turn(agent_id, session_id, "6 * 7?")
    assert paused["status"] == "awaiting_input"

    fork = await _fork(app, agent_id, session_id, paused["turn_id"])
    listing = (await app.session(agent_id, fork))["turns"]
    assert listing[0]["turn_id"] == first["turn_id"], "the ended turn is shared"
    assert listing[1]["turn_id"] != paused["turn_id"] and listing[1]["status"] == "awaiting_input"
    assert [t.turn_id for t in await app.store.list_turns([fork])] == [listing[1]["turn_id"]], "the paused one copied"

    held = {a["session_id"]: a for a in (await http.get("/v1/approvals")).json()["data"]}
    app.script.enqueue(ScriptedReply(text="42 in the fork"))
    assert (await http.post(f"/v1/approvals/{held[fork]['id']}/approve")).status_code == 202
    async with http.stream("GET", f"{turn_url(agent_id, fork, listing[1]['turn_id'])}/events") as events:
        async for _ in events.aiter_lines():
            pass
    assert texts(await app.prompt(3))[:3] == ["hello", "re: hello", "6 * 7?"]
    done = (await http.get(turn_url(agent_id, fork, listing[1]["turn_id"]))).json()
    assert (done["status"], done["output_message"]["content"]) == ("completed", "42 in the fork")
    original = (await http.get(turn_url(agent_id, session_id, paused["turn_id"]))).json()
    assert original["status"] == "awaiting_input", "the original's turn still waits"


async def test_a_fork_past_a_paused_turn_is_refused(app: App) -> None:
    config = {"model": "scripted-model", "instructions": "-", "toolgroups": ["builtin::math"]}
    created = await app.http.post("/v1/agents", json={"agent_config": {**config, "require_approval": "always"}})
    agent_id = created.json()["agent_id"]
    session_id = (await app.http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})).json()[
        "session_id"
    ]
    app.script.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="calculator", arguments={"expression": "1"})]))
    assert (await app.turn(agent_id, session_id, "1?"))["status"] == "awaiting_input"
    later = (await _turns(app, agent_id, session_id, "next"))[0]
    refused = await app.http.post(f"{session_url(agent_id, session_id)}/fork", json={"turn_id": later["turn_id"]})
    assert_error(refused, 409, "conflict")
    assert await _lineages(app) == [], "a refused fork leaves no lineage"


async def _conversation(app: App, n: int) -> tuple[str, list[dict[str, Any]]]:
    conversation = (await app.http.post("/v1/conversations", json={})).json()["id"]
    for k in range(n):
        app.script.enqueue(ScriptedReply(text=f"answer {k}"))
        body = {"model": "scripted-model", "input": f"question {k}", "conversation": conversation}
        assert (await app.http.post("/v1/responses", json=body)).status_code == 200
    items = (await app.http.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"})).json()["data"]
    return conversation, items


async def _all_pages(app: App, conversation: str, order: str, limit: int) -> list[str]:
    seen: list[str] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"order": order, "limit": limit, **({"after": after} if after else {})}
        page = (await app.http.get(f"/v1/conversations/{conversation}/items", params=params)).json()
        seen += [item["id"] for item in page["data"]]
        if not page["has_more"]:
            return seen
        after = page["data"][-1]["id"]


async def test_a_conversation_fork_pages_across_what_it_shares_and_what_it_adds(app: App) -> None:
    http = app.http
    conversation, items = await _conversation(app, 2)
    forked = await http.post(f"/v1/conversations/{conversation}/fork", json={"item_id": items[2]["id"]})
    fork = forked.json()["id"]
    added = await http.post(
        f"/v1/conversations/{fork}/items",
        json={"items": [{"type": "message", "role": "user", "content": f"own {k}"} for k in range(3)]},
    )
    assert added.status_code == 200, added.text
    own = [item["id"] for item in added.json()["data"]]
    whole = [*(item["id"] for item in items[:3]), *own]
    assert len(await app.store.all_items(fork)) == len(own), "the fork holds its own items alone"
    for limit in (1, 2, 3, 4, 6, 7):
        assert await _all_pages(app, fork, "asc", limit) == whole, limit
        assert await _all_pages(app, fork, "desc", limit) == whole[::-1], limit
    shared = await http.get(f"/v1/conversations/{fork}/items/{items[1]['id']}")
    assert shared.status_code == 200 and shared.json() == items[1]
    assert_error(await http.get(f"/v1/conversations/{fork}/items/{items[3]['id']}"), 404, "not_found")


async def test_deleting_items_or_the_original_conversation_leaves_the_fork_whole(app: App) -> None:
    http = app.http
    conversation, items = await _conversation(app, 2)
    ids = [item["id"] for item in items]
    fork = (await http.post(f"/v1/conversations/{conversation}/fork", json={"item_id": ids[2]})).json()["id"]

    assert (await http.delete(f"/v1/conversations/{fork}/items/{ids[0]}")).status_code == 200
    assert await _all_pages(app, fork, "asc", 10) == ids[1:3], "hidden in the fork"
    assert await _all_pages(app, conversation, "asc", 10) == ids, "the original keeps it"

    assert (await http.delete(f"/v1/conversations/{conversation}/items/{ids[1]}")).status_code == 200
    assert await _all_pages(app, conversation, "asc", 10) == [ids[0], *ids[2:]]
    assert await _all_pages(app, fork, "asc", 10) == ids[1:3], "the fork keeps what it shared"

    assert (await http.delete(f"/v1/conversations/{conversation}")).status_code == 200
    assert await _all_pages(app, fork, "asc", 10) == ids[1:3]
    app.script.enqueue(ScriptedReply(text="forked"))
    body = {"model": "scripted-model", "input": "more", "conversation": fork}
    assert (await http.post("/v1/responses", json=body)).status_code == 200
    assert texts(await app.prompt(3)) == ["answer 0", "question 1", "more"]

    assert (await http.delete(f"/v1/conversations/{fork}")).status_code == 200
    assert await _lineages(app) == [], "the holders went with the last fork sharing them"
    assert not [i for i in await _lineages(app) if i.startswith(HELD_ITEMS)]


class _DeletedWhileForked:
    """The store, but the original session is deleted just as the fork's session is written."""

    def __init__(self, store: Store, agent_id: str, session_id: str) -> None:
        self._store, self._original = store, (agent_id, session_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def create_session(
        self, session: SessionRecord, owner: Owner | None = None, settle: KeySettlement | None = None
    ) -> None:
        await self._store.create_session(session, owner, settle)
        await self._store.delete_session(*self._original)


async def test_a_fork_whose_original_is_deleted_while_it_is_made_is_not_found_and_leaves_nothing(app: App) -> None:
    agent_id, session_id = await agent_and_session(app.http)
    (turn,) = await _turns(app, agent_id, session_id, "a")
    racing = cast(Store, _DeletedWhileForked(app.store, agent_id, session_id))
    reads, sessions = (
        ForkReads(racing, Lineages(app.store.kernel)),
        SessionReads(app.store.kernel, Access(AccessPolicy())),
    )
    forks = SessionForks(
        racing, RecordGuard(racing, Access(AccessPolicy())), reads, lambda: utcnow() + timedelta(minutes=1), sessions
    )
    with pytest.raises(NotFoundError):
        await forks.fork_session(agent_id, session_id, turn["turn_id"], None)
    assert (await app.http.get(f"/v1/agents/{agent_id}/sessions")).json()["data"] == []
    assert await _lineages(app) == []
