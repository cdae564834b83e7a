"""Interrupting or rolling back a turn is a write to it (issue #27, item 3).

A caller who may add turns to a shared session, but only read the turns others run in it,
is refused ``interrupt`` and ``rollback`` (403) before anything is stored, and the turn
running there goes on; ``enqueue`` stops nothing, and is allowed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from integration_helpers import turn_url, user

from ferryman.auth.policy import ACTIONS, parse_policy
from ferryman.auth.principal import Principal, PrincipalKind
from ferryman.errors import AuthenticationError
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply
from inprocess import scripted_provider, serving

pytestmark = pytest.mark.anyio

TOKENS = {
    "token-a": Principal(PrincipalKind.SUBJECT, "alice", {}),
    "token-b": Principal(PrincipalKind.SUBJECT, "bob", {}),
}
A, B = {"Authorization": "Bearer token-a"}, {"Authorization": "Bearer token-b"}
POLICY = parse_policy(
    [
        {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
        {"permit": {"actions": ["read", "update"], "resource": "agent::*"}},
        {"permit": {"actions": ["read", "update"], "resource": "session::*"}},
        {"permit": {"actions": ["read"], "resource": "turn::*"}},
    ]
)


class StaticTokens:
    """Fixed tokens, fixed principals."""

    async def authenticate(self, credential: str) -> Principal:
        try:
            return TOKENS[credential]
        except KeyError:
            raise AuthenticationError() from None


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Script]]:
    script = Script()
    services = build_services(
        SqliteStore(str(tmp_path / "shared.db")),
        [scripted_provider(script)],
        sole_process=True,
        authenticator=StaticTokens(),
        policy=POLICY,
    )
    async with serving(services) as http:
        yield http, script
    script.check()


async def _ok(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


async def test_a_caller_who_may_not_stop_the_running_turn_cannot_interrupt_or_roll_it_back(
    app: tuple[httpx.AsyncClient, Script],
) -> None:
    http, script = app
    agent = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}
    agent_id = (await _ok(await http.post("/v1/agents", json=agent, headers=A)))["agent_id"]
    made = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"}, headers=A)
    session_id = (await _ok(made))["session_id"]
    url = turn_url(agent_id, session_id)
    script.enqueue(ScriptedReply(text="alice's", gate="alice"), ScriptedReply(text="bob's"))
    alice = asyncio.create_task(http.post(url, json={"messages": [user("one")], "stream": False}, headers=A))
    try:
        await script.wait_for_requests(1)
        for strategy in ("interrupt", "rollback"):
            body = {"messages": [user("stop")], "stream": False, "multitask_strategy": strategy}
            refused = await http.post(url, json=body, headers=B)
            assert refused.status_code == 403, (strategy, refused.text)
        session = await _ok(await http.get(f"/v1/agents/{agent_id}/session/{session_id}", headers=A))
        assert [turn["status"] for turn in session["turns"]] == ["in_progress"], "nothing was stored or stopped"
        body = {"messages": [user("two")], "stream": False, "multitask_strategy": "enqueue"}
        bob = asyncio.create_task(http.post(url, json=body, headers=B))
    finally:
        script.open_gate("alice")
    assert (await _ok(await alice))["status"] == "completed"
    assert (await _ok(await bob))["status"] == "completed"
