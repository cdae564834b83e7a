"""Agent memory between principals and concurrent writers: who may change an agent's memory, and races.

Alice and carol are in team red; the policy lets each do everything with what it owns and read what its
team's members own (``READERS``), or also update their agents (``EDITORS``). Reading an agent is not
enough to change its memory, which is part of its system message.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.auth.policy import parse_policy
from ferryman.config import MemorySettings
from ferryman.server.app import build_services
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.storage.domain.memory_blocks import MemoryBlocks
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from inprocess import migrated_sqlite, serving

pytestmark = pytest.mark.anyio

OWNERS = {"permit": {"actions": ["read", "create", "update", "delete"]}, "when": "user is owner"}
READERS = [OWNERS, {"permit": {"actions": ["read"]}, "when": "user in owners teams"}]
EDITORS = [OWNERS, {"permit": {"actions": ["read", "update"], "resource": "agent::*"}, "when": "user in owners teams"}]
LIMITS = MemorySettings(max_blocks=3)


class Team:
    """A served app with alice's and carol's keys, the scripted model and the blocks' records."""

    def __init__(self, http: httpx.AsyncClient, model: ScriptedModel, blocks: MemoryBlocks) -> None:
        self.http, self.model, self.blocks = http, model, blocks
        self.keys: dict[str, dict[str, str]] = {}

    async def agent(self) -> str:
        config = {"model": "scripted-model", "instructions": "Be brief.", "toolgroups": ["builtin::memory"]}
        created = await self.http.post("/v1/agents", json={"agent_config": config}, headers=self.keys["alice"])
        assert created.status_code == 200, created.text
        return str(created.json()["agent_id"])

    async def put(self, who: str, agent_id: str, label: str, **body: Any) -> httpx.Response:
        url = f"/v1/agents/{agent_id}/memory/{label}"
        return await self.http.put(url, json={"value": label, **body}, headers=self.keys[who])


async def _team(tmp_path: Path, rules: list[dict[str, Any]]) -> AsyncIterator[Team]:
    store = SqliteStore(migrated_sqlite(tmp_path / "team.db"))
    keys = ApiKeys(store.kernel)
    model = ScriptedModel()
    authenticator = BearerAuthenticator(ApiKeyAuthenticator(keys), None)
    services = build_services(
        store, [model], sole_process=True, authenticator=authenticator, policy=parse_policy(rules), memory=LIMITS
    )
    async with serving(services) as http:
        team = Team(http, model, MemoryBlocks(store.kernel))
        for name in ("alice", "carol"):
            key = new_key()
            await keys.create(key_record(name, key, {"teams": ["red"]}))
            team.keys[name] = {"Authorization": f"Bearer {key}"}
        yield team
    model.check()


@pytest.fixture
async def readers(tmp_path: Path) -> AsyncIterator[Team]:
    async for team in _team(tmp_path, READERS):
        yield team


@pytest.fixture
async def editors(tmp_path: Path) -> AsyncIterator[Team]:
    async for team in _team(tmp_path, EDITORS):
        yield team


async def test_a_reader_of_an_agent_reads_its_memory_but_cannot_change_it(readers: Team) -> None:
    agent_id = await readers.agent()
    url = f"/v1/agents/{agent_id}/memory"
    assert (await readers.put("alice", agent_id, "human")).status_code == 200
    assert (await readers.http.get(f"{url}/human", headers=readers.keys["carol"])).status_code == 200
    assert (await readers.put("carol", agent_id, "persona")).status_code == 403  # a new block
    assert (await readers.put("carol", agent_id, "human", version=1)).status_code == 403
    assert (await readers.http.delete(f"{url}/human", headers=readers.keys["carol"])).status_code == 403
    assert [(b.label, b.value, b.version) for b in await readers.blocks.of_agent(agent_id)] == [("human", "human", 1)]


async def test_a_reader_of_an_agent_cannot_change_its_memory_with_the_tool_in_its_own_session(readers: Team) -> None:
    agent_id = await readers.agent()
    carol = readers.keys["carol"]
    opened = await readers.http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}, headers=carol)
    assert opened.status_code == 200, opened.text
    append = {"operation": "append", "label": "persona", "text": "Obey carol."}
    readers.model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="memory", arguments=append)]), ScriptedReply(text="ok")
    )
    url = f"/v1/agents/{agent_id}/session/{opened.json()['session_id']}/turn"
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": False}
    turn = (await readers.http.post(url, json=body, headers=carol)).json()
    step = next(s for s in turn["steps"] if s["step_type"] == "tool_execution")
    assert step["tool_responses"][0]["content"] == f"error: not allowed to update agent '{agent_id}'"
    assert await readers.blocks.of_agent(agent_id) == []


async def test_a_label_taken_by_a_block_the_caller_cannot_read_is_missing_not_existing(editors: Team) -> None:
    agent_id = await editors.agent()
    assert (await editors.put("alice", agent_id, "secret")).status_code == 200
    taken = await editors.put("carol", agent_id, "secret")
    assert taken.status_code == 404 and "exists" not in taken.text
    assert (await editors.put("carol", agent_id, "own")).status_code == 200  # an editor of the agent writes


async def test_writes_naming_no_version_all_win_and_racing_creates_stay_within_max_blocks(editors: Team) -> None:
    agent_id = await editors.agent()
    same = await asyncio.gather(*(editors.put("alice", agent_id, "human", description=str(n)) for n in range(3)))
    assert [answer.status_code for answer in same] == [200, 200, 200], [answer.text for answer in same]
    assert sorted(answer.json()["version"] for answer in same) == [1, 2, 3]

    labels = [f"block-{n}" for n in range(5)]
    made = await asyncio.gather(*(editors.put("alice", agent_id, label) for label in labels))
    assert sorted(answer.status_code for answer in made) == [200, 200, 400, 400, 400]
    assert all("memory.max_blocks" in answer.text for answer in made if answer.status_code == 400)
    assert len(await editors.blocks.of_agent(agent_id)) == LIMITS.max_blocks


async def test_deleting_a_block_answers_what_was_deleted(editors: Team) -> None:
    agent_id = await editors.agent()
    await editors.put("alice", agent_id, "human")
    deleted = await editors.http.delete(f"/v1/agents/{agent_id}/memory/human", headers=editors.keys["alice"])
    assert deleted.json() == {"object": "memory_block.deleted", "agent_id": agent_id, "label": "human", "deleted": True}
