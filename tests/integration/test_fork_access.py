"""Who may read a fork: its caller owns it, and reading it never needs access to the original afterwards.

Alice and carol are in team red. Under the first policy carol may read what her team owns, and forks
alice's session and conversation; under the second (the same database served again) she may read only
alice's agents, yet her forks read whole, while alice's originals, and carol's forks to alice, are 404.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fork_app import texts
from integration_helpers import assert_error, session_url, turn_url, user

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.auth.policy import parse_policy
from ferryman.server.app import build_services
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.storage.domain.forks import Lineages
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply
from inprocess import migrated_sqlite, scripted_provider, serving

pytestmark = pytest.mark.anyio

OWNERS = {"permit": {"actions": ["read", "create", "update", "delete"]}, "when": "user is owner"}
TEAM_READS = [OWNERS, {"permit": {"actions": ["read"]}, "when": "user in owners teams"}]
TEAM_READS_AGENTS = [OWNERS, {"permit": {"actions": ["read"], "resource": "agent::*"}, "when": "user in owners teams"}]


@asynccontextmanager
async def _served(db: str, script: Script, rules: list[dict[str, Any]]) -> AsyncIterator[httpx.AsyncClient]:
    store = SqliteStore(db)
    authenticator = BearerAuthenticator(ApiKeyAuthenticator(ApiKeys(store.kernel)), None)
    services = build_services(
        store, [scripted_provider(script)], sole_process=True, authenticator=authenticator, policy=parse_policy(rules)
    )
    async with serving(services) as http:
        yield http


async def _ok(http: httpx.AsyncClient, method: str, url: str, who: dict[str, str], **kw: Any) -> Any:
    answer = await http.request(method, url, headers=who, **kw)
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_a_fork_reads_whole_after_its_caller_lost_access_to_the_original(tmp_path: Path) -> None:
    db, script = migrated_sqlite(tmp_path / "forks.db"), Script()
    keys: dict[str, dict[str, str]] = {}
    async with _served(db, script, TEAM_READS) as http:
        store = SqliteStore(db)
        await store.open()
        try:
            for name in ("alice", "carol"):
                key = new_key()
                await ApiKeys(store.kernel).create(key_record(name, key, {"teams": ["red"]}))
                keys[name] = {"Authorization": f"Bearer {key}"}
        finally:
            await store.close()
        alice, carol = keys["alice"], keys["carol"]
        config = {"model": "scripted-model", "instructions": "-"}
        agent_id = (await _ok(http, "POST", "/v1/agents", alice, json={"agent_config": config}))["agent_id"]
        url = f"/v1/agents/{agent_id}/session"
        session_id = (await _ok(http, "POST", url, alice, json={"session_name": "s"}))["session_id"]
        script.enqueue(ScriptedReply(text="hi alice"))
        body = {"messages": [user("hello")], "stream": False}
        turn = await _ok(http, "POST", turn_url(agent_id, session_id), alice, json=body)
        fork_id = (await _ok(http, "POST", f"{session_url(agent_id, session_id)}/fork", carol,
                             json={"turn_id": turn["turn_id"]}))["session_id"]  # fmt: skip
        conversation = (await _ok(http, "POST", "/v1/conversations", alice, json={}))["id"]
        items = {"items": [{"type": "message", "role": "user", "content": "alice's note"}]}
        item = (await _ok(http, "POST", f"/v1/conversations/{conversation}/items", alice, json=items))["data"][0]
        forked = await _ok(http, "POST", f"/v1/conversations/{conversation}/fork", carol, json={"item_id": item["id"]})

    async with _served(db, script, TEAM_READS_AGENTS) as http:
        assert_error(await http.get(session_url(agent_id, session_id), headers=carol), 404, "not_found")
        fork = await _ok(http, "GET", session_url(agent_id, fork_id), carol)
        assert [t["turn_id"] for t in fork["turns"]] == [turn["turn_id"]]
        assert await _ok(http, "GET", turn_url(agent_id, fork_id, turn["turn_id"]), carol) == turn
        step = turn["steps"][0]["step_id"]
        await _ok(http, "GET", f"{turn_url(agent_id, fork_id, turn['turn_id'])}/step/{step}", carol)
        script.enqueue(ScriptedReply(text="hi carol"))
        await _ok(http, "POST", turn_url(agent_id, fork_id), carol, json={"messages": [user("again")], "stream": False})
        assert texts(script.requests[-1]) == ["hello", "hi alice", "again"]
        assert_error(await http.get(session_url(agent_id, fork_id), headers=alice), 404, "not_found")

        assert_error(await http.get(f"/v1/conversations/{conversation}/items", headers=carol), 404, "not_found")
        shared = await _ok(http, "GET", f"/v1/conversations/{forked['id']}/items", carol)
        assert [i["id"] for i in shared["data"]] == [item["id"]]
        await _ok(http, "GET", f"/v1/conversations/{forked['id']}/items/{item['id']}", carol)
        assert_error(await http.get(f"/v1/conversations/{forked['id']}/items", headers=alice), 404, "not_found")
    script.check()


async def test_a_reader_deleting_a_shared_item_is_refused_before_anything_moves(tmp_path: Path) -> None:
    # Copy-on-delete runs as the server: it must not run for a caller who may not change the conversation.
    db = migrated_sqlite(tmp_path / "forks.db")
    store = SqliteStore(db)
    await store.open()
    try:
        keys: dict[str, dict[str, str]] = {}
        for name in ("alice", "carol"):
            key = new_key()
            await ApiKeys(store.kernel).create(key_record(name, key, {"teams": ["red"]}))
            keys[name] = {"Authorization": f"Bearer {key}"}
        alice, carol = keys["alice"], keys["carol"]
        async with _served(db, Script(), TEAM_READS) as http:
            conversation = (await _ok(http, "POST", "/v1/conversations", alice, json={}))["id"]
            items = {"items": [{"type": "message", "role": "user", "content": text} for text in ("one", "two")]}
            added = await _ok(http, "POST", f"/v1/conversations/{conversation}/items", alice, json=items)
            first, second = (item["id"] for item in added["data"])
            fork = await _ok(http, "POST", f"/v1/conversations/{conversation}/fork", alice, json={"item_id": second})
            lineages = Lineages(store.kernel)
            before = await lineages.find(fork["id"])
            refused = await http.delete(f"/v1/conversations/{conversation}/items/{first}", headers=carol)
            assert_error(refused, 403, "forbidden")
            assert await lineages.find(fork["id"]) == before, "the fork still shares the original, not a holder"
            assert [lineage.id for lineage in (await lineages.records.page(parent="")).items] == [fork["id"]]
    finally:
        await store.close()
