"""What forks share when it moves: a hide changes the hiding fork alone, a copy-on-delete cut short leaves every
fork whole, and a fork's turn does not read its sources' turns again while nothing moved. Every storage backend."""

from __future__ import annotations

from typing import Any

import pytest
from fork_app import App, app_fixture, texts  # noqa: F401  (fixtures)
from integration_helpers import session_url
from store_records import sessions_of

from ferryman.services.forks import HELD_AGENT
from ferryman.storage.domain.forks import Lineage, Lineages
from ferryman.testing import ScriptedReply
from inprocess import agent_and_session

pytestmark = pytest.mark.anyio


async def _texts(app: App, conversation: str) -> list[str]:
    page = await app.http.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"})
    return [item["content"][0]["text"] for item in page.json()["data"]]


async def _fork_conversation(app: App, conversation: str, item_id: str) -> str:
    forked = await app.http.post(f"/v1/conversations/{conversation}/fork", json={"item_id": item_id})
    assert forked.status_code == 200, forked.text
    return str(forked.json()["id"])


async def _fork(app: App, agent_id: str, session_id: str, turn_id: str) -> str:
    forked = await app.http.post(f"{session_url(agent_id, session_id)}/fork", json={"turn_id": turn_id})
    assert forked.status_code == 200, forked.text
    return str(forked.json()["session_id"])


def _inputs(session: dict[str, Any]) -> list[str]:
    return [turn["input_messages"][0]["content"] for turn in session["turns"]]


async def test_a_fork_hiding_a_shared_item_leaves_its_own_forks_history_as_it_was(app: App) -> None:
    original = (await app.http.post("/v1/conversations", json={})).json()["id"]
    items = {"items": [{"type": "message", "role": "user", "content": text} for text in ("x", "y")]}
    added = await app.http.post(f"/v1/conversations/{original}/items", json=items)
    x, y = (item["id"] for item in added.json()["data"])
    fork = await _fork_conversation(app, original, y)
    mine = (await app.http.post(f"/v1/conversations/{fork}/items", json={"items": [
        {"type": "message", "role": "user", "content": "z"}]})).json()["data"][0]["id"]  # fmt: skip
    through_shared, through_x, through_own = (
        await _fork_conversation(app, fork, y),
        await _fork_conversation(app, fork, x),
        await _fork_conversation(app, fork, mine),
    )
    assert (await app.http.delete(f"/v1/conversations/{fork}/items/{x}")).status_code == 200
    assert await _texts(app, fork) == ["y", "z"]
    assert await _texts(app, through_shared) == ["x", "y"]
    assert await _texts(app, through_x) == ["x"]
    assert await _texts(app, through_own) == ["x", "y", "z"]
    assert await _texts(app, original) == ["x", "y"]
    assert (await app.http.delete(f"/v1/conversations/{fork}")).status_code == 200
    assert await _texts(app, through_own) == ["x", "y", "z"], "the holder of the fork as it was stays"


async def test_a_copy_on_delete_cut_short_leaves_every_fork_whole_and_no_lineage_below_renamed(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id, session_id = await agent_and_session(app.http)
    app.script.enqueue(ScriptedReply(text="re: a"))
    turn_id = (await app.turn(agent_id, session_id, "a"))["turn_id"]
    first = await _fork(app, agent_id, session_id, turn_id)
    below = await _fork(app, agent_id, first, turn_id)
    second = await _fork(app, agent_id, session_id, turn_id)
    lineages = Lineages(app.store.kernel)
    change, repointed = Lineages.change, list[str]()

    async def dies_on_the_second(self: Lineages, fork_id: str, edit: Any) -> Lineage | None:
        if repointed:
            raise RuntimeError("the server died here")
        repointed.append(fork_id)
        return await change(self, fork_id, edit)

    monkeypatch.setattr(Lineages, "change", dies_on_the_second)
    assert (await app.http.delete(session_url(agent_id, session_id))).status_code == 500
    monkeypatch.setattr(Lineages, "change", change)
    for fork in (first, below, second):
        assert _inputs(await app.session(agent_id, fork)) == ["a"], fork
    assert (await app.http.delete(session_url(agent_id, session_id))).status_code == 200
    for fork in (first, below, second):
        assert _inputs(await app.session(agent_id, fork)) == ["a"], fork
    assert (await lineages.find(below)).through == turn_id  # type: ignore[union-attr]
    app.script.enqueue(ScriptedReply(text="re: b"))
    await app.turn(agent_id, below, "b")
    assert texts(await app.prompt(2)) == ["a", "re: a", "b"]
    for fork in (below, first, second):
        assert (await app.http.delete(session_url(agent_id, fork))).status_code == 200
    assert (await sessions_of(app.store, HELD_AGENT)).items == []
    assert (await lineages.records.page(parent="")).items == []


async def test_a_turn_in_a_fork_of_a_fork_reads_no_source_turns_again(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id, session_id = await agent_and_session(app.http)
    turn_ids = []
    for question in ("a", "b", "c"):
        app.script.enqueue(ScriptedReply(text=f"re: {question}"))
        turn_ids.append((await app.turn(agent_id, session_id, question))["turn_id"])
    below = await _fork(app, agent_id, await _fork(app, agent_id, session_id, turn_ids[1]), turn_ids[0])
    app.script.enqueue(ScriptedReply(text="re: d"))
    await app.turn(agent_id, below, "d")
    list_turns, loaded = app.store.list_turns, list[str]()

    async def counted(session_ids: list[str], turn_ids: list[str] | None = None) -> Any:
        loaded.extend(session_ids)
        return await list_turns(session_ids, turn_ids)

    monkeypatch.setattr(app.store, "list_turns", counted)
    app.script.enqueue(ScriptedReply(text="re: e"))
    await app.turn(agent_id, below, "e")
    assert texts(await app.prompt(5)) == ["a", "re: a", "d", "re: d", "e"]
    assert session_id not in loaded, "the shared history came from this replica's cache"
    assert _inputs(await app.session(agent_id, below)) == ["a", "d", "e"]


async def test_a_holder_no_fork_came_to_share_goes_with_the_failed_delete(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id, session_id = await agent_and_session(app.http)
    app.script.enqueue(ScriptedReply(text="re: a"))
    turn_id = (await app.turn(agent_id, session_id, "a"))["turn_id"]
    fork = await _fork(app, agent_id, session_id, turn_id)
    lineages = Lineages(app.store.kernel)
    change = Lineages.change

    async def dies(self: Lineages, fork_id: str, edit: Any) -> Lineage | None:
        raise RuntimeError("the server died here")

    monkeypatch.setattr(Lineages, "change", dies)
    assert (await app.http.delete(session_url(agent_id, session_id))).status_code == 500
    monkeypatch.setattr(Lineages, "change", change)
    assert (await sessions_of(app.store, HELD_AGENT)).items == []
    assert [lineage.id for lineage in (await lineages.records.page(parent="")).items] == [fork]
    assert (await app.http.delete(session_url(agent_id, session_id))).status_code == 200
    assert _inputs(await app.session(agent_id, fork)) == ["a"]
    assert len((await sessions_of(app.store, HELD_AGENT)).items) == 1
