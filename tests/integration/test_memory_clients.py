"""Agent memory through ferryman's own clients, against a running server: ``client.memory`` (sync and async)
and ``ferryman memory list|show|set|delete``."""

from __future__ import annotations

import pytest
from cli_support import cli

from ferryman.client import AsyncClient, Client
from ferryman.client.errors import ConflictError, NotFoundError


def _agent(client: Client) -> str:
    return client.agents.create({"model": "scripted-model", "instructions": "Remember."}).agent_id


def test_the_sdk_writes_reads_versions_and_deletes_blocks(served_base_url: str) -> None:
    with Client(base_url=served_base_url) as client:
        agent_id = _agent(client)
        made = client.memory.set(agent_id, "human", "Name: Ada", description="the user")
        assert (made.label, made.version, made.description) == ("human", 1, "the user")
        assert client.memory.set(agent_id, "human", "Name: Ada L.", version=1).version == 2
        with pytest.raises(ConflictError):
            client.memory.set(agent_id, "human", "stale", version=1)
        assert [b.value for b in client.memory.list(agent_id)] == ["Name: Ada L."]
        assert [v.version for v in client.memory.versions(agent_id, "human")] == [2, 1]
        client.memory.delete(agent_id, "human")
        with pytest.raises(NotFoundError):
            client.memory.get(agent_id, "human")


@pytest.mark.anyio
async def test_the_async_sdk_does_the_same(served_base_url: str) -> None:
    with Client(base_url=served_base_url) as sync:
        agent_id = _agent(sync)
    async with AsyncClient(base_url=served_base_url) as client:
        await client.memory.set(agent_id, "persona", "Terse.")
        again = await client.memory.set(agent_id, "persona", "Terse and kind.", version=1)
        assert (await client.memory.get(agent_id, "persona")).version == again.version == 2
        assert [v.value for v in await client.memory.versions(agent_id, "persona")] == ["Terse and kind.", "Terse."]
        assert [b.label for b in await client.memory.list(agent_id)] == ["persona"]
        await client.memory.delete(agent_id, "persona")
        assert await client.memory.list(agent_id) == []


def test_the_cli_lists_shows_sets_and_deletes_blocks(capsys: pytest.CaptureFixture[str], served_base_url: str) -> None:
    base = served_base_url
    with Client(base_url=base) as client:
        agent_id = _agent(client)
    assert cli(capsys, base, "memory", "list", agent_id).err.startswith(f"agent {agent_id} has no memory blocks")
    made = cli(capsys, base, "memory", "set", agent_id, "human", "Name: Ada", "--description", "the user", "--json")
    assert made.json()["version"] == 1
    said = cli(capsys, base, "memory", "set", agent_id, "human", "Name: Ada Lovelace", "--version", "1")
    assert said.code == 0 and "memory block human is at version 2" in said.out
    stale = cli(capsys, base, "memory", "set", agent_id, "human", "lost", "--version", "1")
    assert stale.code == 1 and stale.err.startswith("error: conflict: ")

    table = cli(capsys, base, "memory", "list", agent_id)
    assert table.code == 0 and "human" in table.out and "Name: Ada Lovelace" in table.out
    shown = cli(capsys, base, "memory", "show", agent_id, "human")
    assert shown.code == 0 and "the user" in shown.out and "Name: Ada Lovelace" in shown.out
    versions = cli(capsys, base, "memory", "show", agent_id, "human", "--versions", "--json").json()
    assert [(v["version"], v["value"]) for v in versions] == [(2, "Name: Ada Lovelace"), (1, "Name: Ada")]

    assert cli(capsys, base, "memory", "delete", agent_id, "human", "--json").json() == {"deleted": "human"}
    gone = cli(capsys, base, "memory", "show", agent_id, "human")
    assert gone.code == 1 and gone.err.startswith("error: not_found: ")
