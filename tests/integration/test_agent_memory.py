"""Agent memory over HTTP: blocks read and written through the API, edited by the agent, recalled in new sessions.

Authentication is on, with two API keys: one caller's agent and blocks are missing to the other. The agent's
model is the scripted one; the prompts it receives show what the agent read of its memory.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.config import MemorySettings
from ferryman.server.app import build_services
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.storage.domain.memory_blocks import MemoryBlocks
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply
from ferryman.testing.scripted import ScriptedToolCall
from inprocess import scripted_provider, serving

pytestmark = pytest.mark.anyio

LIMITS = MemorySettings(max_block_chars=200, max_blocks=3, max_versions=2)


class Memory:
    """A served app with two callers' keys, and the script its model answers from."""

    def __init__(self, http: httpx.AsyncClient, script: Script, blocks: MemoryBlocks, alice: str, bob: str) -> None:
        self.http, self.script, self.blocks = http, script, blocks
        self.alice = {"Authorization": f"Bearer {alice}"}
        self.bob = {"Authorization": f"Bearer {bob}"}

    async def agent(self, toolgroups: list[str] | None = None) -> str:
        config = {"model": "scripted-model", "instructions": "You are a helpful assistant."}
        answer = await self.http.post(
            "/v1/agents", json={"agent_config": {**config, "toolgroups": toolgroups or []}}, headers=self.alice
        )
        assert answer.status_code == 200, answer.text
        return str(answer.json()["agent_id"])

    async def turn(self, agent_id: str, text: str) -> dict[str, Any]:
        opened = await self.http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}, headers=self.alice)
        session_id = opened.json()["session_id"]
        body = {"messages": [{"role": "user", "content": text}], "stream": False}
        answer = await self.http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body, headers=self.alice)
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[Memory]:
    store = SqliteStore(str(tmp_path / "memory.db"))
    script = Script()
    authenticator = BearerAuthenticator(ApiKeyAuthenticator(ApiKeys(store.kernel)), None)
    services = build_services(
        store, [scripted_provider(script)], sole_process=True, authenticator=authenticator, memory=LIMITS
    )
    async with serving(services) as http:
        alice, bob = new_key(), new_key()
        await ApiKeys(store.kernel).create(key_record("alice", alice, {}))
        await ApiKeys(store.kernel).create(key_record("bob", bob, {}))
        yield Memory(http, script, MemoryBlocks(store.kernel), alice, bob)
    script.check()


def _system(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


async def test_blocks_are_created_read_versioned_and_deleted_with_compare_and_set(memory: Memory) -> None:
    http, alice = memory.http, memory.alice
    agent_id = await memory.agent()
    url = f"/v1/agents/{agent_id}/memory"
    assert (await http.get(url, headers=alice)).json() == {"object": "list", "data": []}

    made = await http.put(f"{url}/human", json={"value": "Name: Ada", "description": "the user"}, headers=alice)
    assert made.status_code == 200, made.text
    assert (made.json()["version"], made.json()["value"], made.json()["description"]) == (1, "Name: Ada", "the user")
    second = await http.put(f"{url}/human", json={"value": "Name: Ada Lovelace", "version": 1}, headers=alice)
    assert second.json()["version"] == 2 and second.json()["description"] == "the user"

    stale = await http.put(f"{url}/human", json={"value": "lost update", "version": 1}, headers=alice)
    assert stale.status_code == 409 and "version 2" in stale.text
    assert (await http.get(f"{url}/human", headers=alice)).json()["value"] == "Name: Ada Lovelace"
    await http.put(f"{url}/human", json={"value": "v3"}, headers=alice)  # no version: written whatever it is
    await http.put(f"{url}/human", json={"value": "v4"}, headers=alice)

    versions = (await http.get(f"{url}/human/versions", headers=alice)).json()["data"]
    # The current one and max_versions (2) earlier ones, newest first; version 1 was dropped.
    assert [(v["version"], v["value"]) for v in versions] == [(4, "v4"), (3, "v3"), (2, "Name: Ada Lovelace")]
    assert [b["label"] for b in (await http.get(url, headers=alice)).json()["data"]] == ["human"]

    assert (await http.delete(f"{url}/human", headers=alice)).status_code == 200
    assert (await http.get(f"{url}/human", headers=alice)).status_code == 404
    assert (await http.delete(f"{url}/human", headers=alice)).status_code == 404
    missing = await http.put(f"{url}/human", json={"value": "x", "version": 1}, headers=alice)
    assert missing.status_code == 404


async def test_limits_are_refused_naming_their_setting(memory: Memory) -> None:
    http, alice = memory.http, memory.alice
    url = f"/v1/agents/{await memory.agent()}/memory"
    too_long = await http.put(f"{url}/big", json={"value": "x" * 201}, headers=alice)
    assert too_long.status_code == 400 and "memory.max_block_chars" in too_long.text
    for label in ("a", "b", "c"):
        assert (await http.put(f"{url}/{label}", json={"value": label}, headers=alice)).status_code == 200
    one_more = await http.put(f"{url}/d", json={"value": "d"}, headers=alice)
    assert one_more.status_code == 400 and "memory.max_blocks" in one_more.text
    bad_label = await http.put(f"{url}/-x", json={"value": "d"}, headers=alice)
    assert bad_label.status_code == 400 and "label" in bad_label.text


async def test_another_callers_agent_and_blocks_are_missing_to_it(memory: Memory) -> None:
    http, alice, bob = memory.http, memory.alice, memory.bob
    agent_id = await memory.agent()
    url = f"/v1/agents/{agent_id}/memory"
    assert (await http.put(f"{url}/secret", json={"value": "alice's"}, headers=alice)).status_code == 200
    assert (await http.get(url, headers=bob)).status_code == 404
    assert (await http.get(f"{url}/secret", headers=bob)).status_code == 404
    assert (await http.get(f"{url}/secret/versions", headers=bob)).status_code == 404
    assert (await http.put(f"{url}/secret", json={"value": "bob's"}, headers=bob)).status_code == 404
    assert (await http.put(f"{url}/other", json={"value": "bob's"}, headers=bob)).status_code == 404
    assert (await http.delete(f"{url}/secret", headers=bob)).status_code == 404
    kept = (await http.get(f"{url}/secret", headers=alice)).json()
    assert (kept["value"], kept["version"]) == ("alice's", 1)
    assert [b["label"] for b in (await http.get(url, headers=alice)).json()["data"]] == ["secret"]


async def test_the_agent_edits_its_memory_with_the_memory_tool_as_a_tool_step(memory: Memory) -> None:
    agent_id = await memory.agent(["builtin::memory"])
    url = f"/v1/agents/{agent_id}/memory/human"
    await memory.http.put(url, json={"value": "Name: unknown"}, headers=memory.alice)
    replace = {"operation": "replace", "label": "human", "old": "unknown", "new": "Ada"}
    append = {"operation": "append", "label": "human", "text": "Likes: tea"}
    memory.script.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="memory", arguments=replace)]),
        ScriptedReply(tool_calls=[ScriptedToolCall(name="memory", arguments=append)]),
        ScriptedReply(text="Noted, Ada."),
    )
    turn = await memory.turn(agent_id, "I am Ada and I like tea.")
    assert turn["status"] == "completed", turn
    tool_steps = [s for s in turn["steps"] if s["step_type"] == "tool_execution"]
    assert [s["tool_responses"][0]["content"] for s in tool_steps] == [
        "memory block 'human' is now at version 2",
        "memory block 'human' is now at version 3",
    ]
    block = (await memory.http.get(url, headers=memory.alice)).json()
    assert (block["value"], block["version"]) == ("Name: Ada\nLikes: tea", 3)
    first = memory.script.requests[0]
    assert [tool["function"]["name"] for tool in first["tools"]] == ["memory"]
    assert "Name: unknown" in _system(first) and "`memory` tool" in _system(first)


async def test_a_failed_edit_is_told_to_the_model_and_changes_nothing(memory: Memory) -> None:
    agent_id = await memory.agent(["builtin::memory"])
    bad = {"operation": "replace", "label": "human", "old": "absent", "new": "x"}
    memory.script.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="memory", arguments=bad)]), ScriptedReply(text="ok")
    )
    turn = await memory.turn(agent_id, "hi")
    response = next(s for s in turn["steps"] if s["step_type"] == "tool_execution")["tool_responses"][0]
    assert "no memory block of that label" in response["content"]
    listed = await memory.http.get(f"/v1/agents/{agent_id}/memory", headers=memory.alice)
    assert listed.json()["data"] == []


async def test_an_agent_recalls_in_a_new_session_what_it_was_told_in_another(memory: Memory) -> None:
    agent_id = await memory.agent(["builtin::memory"])
    remember = {"operation": "append", "label": "human", "text": "The user's favourite colour is teal."}
    memory.script.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="memory", arguments=remember)]),
        ScriptedReply(text="I will remember that."),
    )
    await memory.turn(agent_id, "My favourite colour is teal. Remember it.")
    told = len(memory.script.requests)

    memory.script.enqueue(ScriptedReply(text="Teal."))
    await memory.turn(agent_id, "What is my favourite colour?")  # another session: none of the first's history
    later = memory.script.requests[told]
    assert [m["role"] for m in later["messages"]] == ["system", "user"]
    assert "The user's favourite colour is teal." in _system(later)
    assert '<memory_block label="human">' in _system(later)


async def test_deleting_the_agent_deletes_its_memory(memory: Memory) -> None:
    http, alice = memory.http, memory.alice
    agent_id = await memory.agent()
    kept = await memory.agent()
    for agent in (agent_id, kept):
        await http.put(f"/v1/agents/{agent}/memory/human", json={"value": "x"}, headers=alice)
    assert (await http.delete(f"/v1/agents/{agent_id}", headers=alice)).status_code == 200
    assert await memory.blocks.of_agent(agent_id) == []
    assert [b.label for b in await memory.blocks.of_agent(kept)] == ["human"]
    assert (await http.get(f"/v1/agents/{agent_id}/memory", headers=alice)).status_code == 404
