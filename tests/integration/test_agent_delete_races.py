"""An agent deleted while a session of it is opened, forked or read: nothing outlives the agent.

No key in storage ties a session to its agent (a session's record is a root, found by its agent's index):
the service reads the agent again after storing a session, deletes an agent's sessions batch by batch before
its record, and forgets a cached agent after its record is gone.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from storage_backends import BACKENDS
from store_records import sessions_of

from ferryman.api.agents import AgentConfig, CreateTurnRequest
from ferryman.api.content import UserMessage
from ferryman.auth.policy import ACTIONS, parse_policy
from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.errors import NotFoundError
from ferryman.server.app import build_services
from ferryman.services import agent_sessions
from ferryman.storage.base import SessionRecord
from ferryman.testing import ScriptedModel, ScriptedReply

pytestmark = pytest.mark.anyio
ALICE = Principal(PrincipalKind.SUBJECT, "alice", {"teams": ("red",)})
CAROL = Principal(PrincipalKind.SUBJECT, "carol", {"teams": ("red",)})
CONFIG = AgentConfig(model="scripted-model", instructions="be brief")


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_an_agent_deletes_its_sessions_batch_by_batch_and_no_other(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_sessions, "_DELETE_BATCH", 2)
    async with BACKENDS[backend](tmp_path) as store:
        agents = build_services(store, [ScriptedModel()], sole_process=True).agents
        agent_id, other_id = await agents.create_agent(CONFIG), await agents.create_agent(CONFIG)
        for n in range(5):
            await agents.create_session(agent_id, f"s{n}")
        kept = await agents.create_session(other_id, "kept")
        await agents.delete_agent(agent_id)
        assert (await sessions_of(store, agent_id)).items == []
        assert [s.session_id for s in (await sessions_of(store, other_id)).items] == [kept]


@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_a_session_stored_after_its_agent_was_deleted_is_undone(backend: str, tmp_path: Path) -> None:
    async with BACKENDS[backend](tmp_path) as store:
        agents = build_services(store, [ScriptedModel()], sole_process=True).agents
        agent_id = await agents.create_agent(CONFIG)
        checked, deleted = asyncio.Event(), asyncio.Event()
        create = store.create_session

        async def late(session: SessionRecord, **kwargs: Any) -> None:  # the write lands once the delete is over
            checked.set()
            await deleted.wait()
            await create(session, **kwargs)

        store.create_session = late  # type: ignore[method-assign]
        opening = asyncio.ensure_future(agents.create_session(agent_id, "late"))
        await checked.wait()
        await agents.delete_agent(agent_id)
        deleted.set()
        with pytest.raises(NotFoundError, match="agent"):
            await opening
        store.create_session = create  # type: ignore[method-assign]
        assert (await sessions_of(store, agent_id)).items == []


async def test_a_fork_needs_the_agent_readable(tmp_path: Path) -> None:
    # Carol's team may read Alice's sessions and turns, not her agent: she may not open a session under it.
    policy = parse_policy(
        [
            {"permit": {"actions": ["read"], "resource": "session::*"}, "when": "user in owners teams"},
            {"permit": {"actions": ["read"], "resource": "turn::*"}, "when": "user in owners teams"},
            {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
        ]
    )
    model = ScriptedModel()
    async with BACKENDS["sqlite"](tmp_path) as store:
        agents = build_services(store, [model], policy=policy, sole_process=True).agents
        with acting_as(ALICE):
            agent_id = await agents.create_agent(CONFIG)
            session_id = await agents.create_session(agent_id, "a")
            model.enqueue(ScriptedReply(text="hi"))
            request = CreateTurnRequest(messages=[UserMessage(content="q")], stream=False)
            live = await agents.start_turn(agent_id, session_id, request)
            await live.task
        with acting_as(CAROL):
            assert (await agents.get_session(agent_id, session_id, None)).session_id == session_id
            with pytest.raises(NotFoundError, match="agent"):
                await agents.fork_session(agent_id, session_id, live.turn_id, None)
        assert [s.session_id for s in (await sessions_of(store, agent_id)).items] == [session_id]


async def test_an_agent_read_while_it_is_deleted_is_not_kept_in_the_cache(tmp_path: Path) -> None:
    async with BACKENDS["sqlite"](tmp_path) as store:
        agents = build_services(store, [ScriptedModel()], sole_process=True).agents
        agent_id = await agents.create_agent(CONFIG)
        delete = agents.agents.delete

        async def read_then_delete(*args: object) -> bool:  # a turn starting elsewhere reads it meanwhile
            await agents.get_agent(agent_id)
            await agents._agent(agent_id, None)
            return await delete(*args)  # type: ignore[arg-type]

        agents.agents.delete = read_then_delete  # type: ignore[method-assign]
        await agents.delete_agent(agent_id)
        with pytest.raises(NotFoundError):
            await agents._agent(agent_id, None)
