"""Forks from the SDK and the CLI: the fork shares the original's turns and items, under their ids."""

from __future__ import annotations

import httpx
import pytest
from cli_support import cli

from ferryman.client import Client
from ferryman.testing import ScriptedReply, ScriptedServerClient
from inprocess import Served

CONFIG = {"model": "scripted-model", "instructions": "Be brief."}
HELLO = [{"role": "user", "content": "hello"}]


def test_the_sdk_forks_a_session_and_a_conversation_sharing_what_they_keep(model: Served) -> None:
    client = Client(http_client=model.http_client())
    agent_id = client.agents.create(CONFIG).agent_id
    session_id = client.agents.sessions.create(agent_id, session_name="s").session_id
    model.enqueue(ScriptedReply(text="one"), ScriptedReply(text="two"))
    first = client.agents.turns.create(agent_id, session_id, messages=HELLO)
    client.agents.turns.create(agent_id, session_id, messages=HELLO)
    fork_id = client.agents.sessions.fork(agent_id, session_id, turn_id=first.turn_id).session_id
    fork = client.agents.sessions.retrieve(agent_id, fork_id)
    assert [(t.turn_id, t.session_id) for t in fork.turns] == [(first.turn_id, session_id)]
    assert client.agents.turns.retrieve(agent_id, fork_id, first.turn_id).turn_id == first.turn_id

    conversation = client.conversations.create(items=[{"type": "message", "role": "user", "content": c} for c in "ab"])
    items = list(client.conversations.items.list(conversation.id, order="asc"))
    forked = client.conversations.fork(conversation.id, item_id=items[0].id or "")
    assert [i.id for i in client.conversations.items.list(forked.id, order="asc")] == [items[0].id]


def test_the_cli_forks_a_session_at_a_turn_it_shares(
    capsys: pytest.CaptureFixture[str], served_base_url: str, served_model: ScriptedServerClient
) -> None:
    with httpx.Client(base_url=served_base_url, timeout=30) as http:
        agent_id = http.post("/v1/agents", json={"agent_config": CONFIG}).json()["agent_id"]
        session_id = http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}).json()["session_id"]
        served_model.enqueue_text("one")
        turn_url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
        turn_id = http.post(turn_url, json={"messages": HELLO, "stream": False}).json()["turn_id"]

        fork = cli(capsys, served_base_url, "sessions", "fork", agent_id, session_id, turn_id, "--json").json()
        again = cli(capsys, served_base_url, "sessions", "fork", agent_id, fork["session_id"], turn_id[:8], "--json")
        assert again.code == 0, again.err
        shared = http.get(f"/v1/agents/{agent_id}/session/{again.json()['session_id']}").json()
        assert [t["turn_id"] for t in shared["turns"]] == [turn_id], "a fork of a fork shares the original's turn"
