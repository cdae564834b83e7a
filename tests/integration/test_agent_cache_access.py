"""The agents service keeps each agent's config for the turns that follow, and still checks every caller.

An agent never changes once created, so a replica keeps the agents its turns read (saving a round trip per
turn); the owner is kept with it, so a kept agent is checked against each caller without reading it again.
Before slice C a kept agent skipped the check: another caller's turn went on to the session's check.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from audit_capture import audit_of
from ferryman.api.agents import AgentConfig, CreateTurnRequest
from ferryman.api.content import UserMessage
from ferryman.auth.policy import AccessPolicy
from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.errors import NotFoundError
from ferryman.server.app import Services, build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel

pytestmark = pytest.mark.anyio

ALICE = Principal(PrincipalKind.SUBJECT, "alice")
BOB = Principal(PrincipalKind.SUBJECT, "bob")
TURN = CreateTurnRequest(messages=[UserMessage(content="hi")])


@pytest.fixture()
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    store = SqliteStore(str(tmp_path / "cache.db"))
    await store.open()
    try:
        yield build_services(store, [ScriptedModel()], policy=AccessPolicy(), sole_process=True)
    finally:
        await store.close()


async def test_a_kept_agent_is_missing_to_a_caller_that_may_not_read_it(
    services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    agents = services.agents
    with acting_as(ALICE):
        agent_id = await agents.create_agent(AgentConfig(model="scripted-model", instructions="be brief"))
        session_id = await agents.create_session(agent_id, "s")
        # A turn of a session that does not exist reads (and keeps) the agent, then stops at the session.
        with pytest.raises(NotFoundError, match="^session 'nope' not found$"):
            await agents.start_turn(agent_id, "nope", TURN)
    caplog.clear()
    with caplog.at_level("INFO", logger="ferryman.audit"), acting_as(BOB):
        with pytest.raises(NotFoundError, match=f"^agent '{agent_id}' not found$"):
            await agents.start_turn(agent_id, session_id, TURN)
        with pytest.raises(NotFoundError, match=f"^agent '{agent_id}' not found$"):
            await agents.get_agent(agent_id)
    assert audit_of(caplog) == [("denied", "sub:bob", "read", f"agent::{agent_id}")] * 2
    with acting_as(ALICE):
        assert (await agents.get_agent(agent_id)).agent_id == agent_id
