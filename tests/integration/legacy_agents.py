"""Agents as the versions before slice C stored them (a table, or Redis hashes), and what they become.

The same agents and owners go into the old SQL table (``test_sql_migrations``) and the old Redis layout
(``test_redis_upgrade``); :func:`assert_agents_moved` reads them back through the kernel after the upgrade:
in their old order, equal, each with its owner and owner terms, and a caller's page filtered in the query.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from ferryman.api.agents import Agent, AgentConfig
from ferryman.api.inference import ToolConfig
from ferryman.storage.domain.agents import agents
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import UNOWNED, Owner, attribute_term, principal_term
from ferryman.storage.kernel.protocol import Kernel

WHEN = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
ALICE = {"kind": "api_key", "id": "alice", "attributes": {"roles": ["dev"], "teams": ["red"]}}
BOB = {"kind": "subject", "id": "bob", "attributes": {"teams": ["blue"]}}

# In the order they were created (the old ids), which is not their ids' order.
AGENTS = [
    Agent(
        agent_id="agent_zeta",
        agent_config=AgentConfig(model="m", instructions="be brief", name="zeta", toolgroups=["builtin::math"]),
        created_at=WHEN,
    ),
    Agent(
        agent_id="agent_alpha",
        agent_config=AgentConfig(model="m", instructions="x", tool_config=ToolConfig(tool_choice="required")),
        created_at=WHEN + timedelta(minutes=1, microseconds=250000),
    ),
    Agent(agent_id="agent_mid", agent_config=AgentConfig(model="m", instructions="unowned"), created_at=WHEN),
]
AGENT_OWNERS = {"agent_zeta": ALICE, "agent_alpha": BOB}
ORPHAN_AGENT = "agent_deleted_long_ago"
"""An owner row whose agent is gone: the upgrade drops it."""


def principal(owner: dict[str, Any]) -> str:
    """The ``principal`` of the old owner rows (the qualified name)."""
    return {"api_key": "key:", "subject": "sub:"}[owner["kind"]] + owner["id"]


def owner_of(agent_id: str) -> Owner | None:
    found = AGENT_OWNERS.get(agent_id)
    return None if found is None else Owner.from_json(found)


async def assert_agents_moved(kernel: Kernel) -> None:
    """Every agent is a kernel record now: in creation order, equal, with its owner; pages filter by owner."""
    records = agents(kernel)
    found = await records.stored_page(parent="")
    assert [item.value for item in found.items] == AGENTS
    assert [item.rec.owner for item in found.items] == [owner_of(a.agent_id) for a in AGENTS]
    assert [item.rec.at for item in found.items] == [a.created_at.timestamp() for a in AGENTS]
    alice = Terms(frozenset({principal_term("key:alice")}))
    assert [a.agent_id for a in await records.all(allow=alice)] == ["agent_zeta"]
    blue = Terms(frozenset({attribute_term("teams", "blue")}))
    assert [a.agent_id for a in await records.all(allow=blue)] == ["agent_alpha"]
    nobody = Terms(frozenset({UNOWNED}))
    assert [a.agent_id for a in await records.all(allow=nobody)] == ["agent_mid"]
    assert await records.find(ORPHAN_AGENT) is None
