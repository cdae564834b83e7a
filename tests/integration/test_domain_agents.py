"""Agents and sessions as kernel records (``storage.domain.agents``), on every kernel of ``kernel_backends``.

What the services read and write through: each record with its owner, a session listed by its agent (or by
none), and a caller's page filtered in the query by the access policy's filter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kernel_backends import BACKENDS

from ferryman.api.agents import Agent, AgentConfig
from ferryman.auth.policy import ACTIONS, AccessPolicy, parse_policy
from ferryman.auth.principal import Principal, PrincipalKind
from ferryman.errors import ConflictError, NotFoundError
from ferryman.services.access import Access
from ferryman.services.agent_records import AgentRecords
from ferryman.storage.base import SessionRecord
from ferryman.storage.domain.agents import agents, sessions
from ferryman.storage.domain.kinds import AGENT, SCHEMA, SESSION
from ferryman.storage.domain.records import Records
from ferryman.storage.kernel.counting import CountingKernel
from ferryman.storage.kernel.protocol import Kernel

pytestmark = pytest.mark.anyio

ALICE = Principal(PrincipalKind.SUBJECT, "alice", {"teams": ("red",)})
BOB = Principal(PrincipalKind.API_KEY, "bob", {"teams": ("red",)})
CAROL = Principal(PrincipalKind.SUBJECT, "carol", {"teams": ("blue",)})
WHEN = datetime(2026, 11, 26, 9, 30, 15, 250000, tzinfo=UTC)
TEAM_READS = parse_policy(
    [
        {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
        {"permit": {"actions": ["read"]}, "when": "user in owners teams"},
    ]
)


@pytest.fixture(params=list(BACKENDS))
async def kernel(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Kernel]:
    async with BACKENDS[request.param](tmp_path, SCHEMA) as opened:
        yield opened


def agent(agent_id: str, name: str | None = None) -> Agent:
    # No name, no tool config: null and default fields must read back as they were.
    config = AgentConfig(model="m", instructions="be brief", name=name, toolgroups=["builtin::calculator"])
    return Agent(agent_id=agent_id, agent_config=config, created_at=WHEN)


def session(session_id: str, agent_id: str | None) -> SessionRecord:
    return SessionRecord(session_id, agent_id, f"name of {session_id}", WHEN)


async def test_an_agent_reads_back_equal_with_its_owner(kernel: Kernel) -> None:
    records, access = agents(kernel), Access(AccessPolicy())
    await records.create(agent("a1"), owner=access.owner(ALICE))
    await records.create(agent("a2", "named"))
    found = await records.find("a1")
    assert found is not None and found.value == agent("a1") and found.rec.owner == access.owner(ALICE)
    assert await records.get("a2") == agent("a2", "named")
    with pytest.raises(ConflictError, match="agent 'a1' already exists"):
        await records.create(agent("a1", "again"))
    with pytest.raises(NotFoundError, match="^agent 'a1' not found$"):
        await records.get("a1", allow=access.filter(CAROL, "read", AGENT))


async def test_a_session_is_listed_by_its_agent_or_by_none(kernel: Kernel) -> None:
    store = sessions(kernel)
    for session_id, agent_id in (("s1", "a1"), ("s2", "a2"), ("s3", "a1"), ("r1", None)):
        await store.create(session(session_id, agent_id))
    assert await store.get("s1") == session("s1", "a1")
    assert await store.get("r1") == session("r1", None)
    assert [s.session_id for s in (await store.page(parent=None, where=("agent_id", "a1"))).items] == ["s1", "s3"]
    assert [s.session_id for s in await store.all(parent=None)] == ["s1", "s2", "s3", "r1"]
    with pytest.raises(ConflictError, match="session 's1' already exists"):
        await store.create(session("s1", "a2"))
    found = await store.find("s1")
    assert found is not None and found.rec.at == WHEN.timestamp()  # created when it started


async def offset_pages(records: Records[Agent], access: Access, who: Principal, size: int) -> list[list[str]]:
    """Every page of ``size`` agents ``who`` may read, by offset, as the Agents API pages."""
    pages: list[list[str]] = []
    while True:
        page = await records.page(allow=access.filter(who, "read", AGENT), offset=size * len(pages), limit=size)
        pages.append([a.agent_id for a in page.items])
        if not page.has_more:
            return pages


async def test_a_callers_pages_hold_only_what_the_policy_lets_it_read(kernel: Kernel) -> None:
    records = agents(kernel)
    owners = {"alice": ALICE, "bob": BOB, "carol": CAROL}
    default, teams = Access(AccessPolicy()), Access(TEAM_READS)
    for n in range(7):
        name = ("alice", "bob", "carol")[n % 3]
        await records.create(agent(f"{name}{n}"), owner=default.owner(owners[name]))
    await records.create(agent("server"))
    assert await offset_pages(records, default, ALICE, 2) == [["alice0", "alice3"], ["alice6"]]
    assert await offset_pages(records, default, ALICE, 3) == [["alice0", "alice3", "alice6"]]
    assert await offset_pages(records, teams, BOB, 2) == [["alice0", "bob1"], ["alice3", "bob4"], ["alice6"]]
    assert await offset_pages(records, teams, CAROL, 5) == [["carol2", "carol5"]]


async def test_an_agents_sessions_page_filters_by_owner(kernel: Kernel) -> None:
    access = Access(AccessPolicy())
    await agents(kernel).create(agent("a1"), owner=access.owner(ALICE))
    store = sessions(kernel)
    for n in range(5):
        who = ALICE if n % 2 == 0 else BOB
        await store.create(session(f"s{n}", "a1"), owner=access.owner(who))
    await store.create(session("elsewhere", "a2"), owner=access.owner(ALICE))
    mine, of_a1 = access.filter(ALICE, "read", SESSION), ("agent_id", "a1")
    first = await store.page(parent=None, where=of_a1, allow=mine, limit=2)
    assert ([s.session_id for s in first.items], first.has_more) == (["s0", "s2"], True)
    rest = await store.page(parent=None, where=of_a1, allow=mine, offset=2, limit=2)
    assert ([s.session_id for s in rest.items], rest.has_more) == (["s4"], False)
    bobs = await store.page(parent=None, where=of_a1, allow=access.filter(BOB, "read", SESSION))
    assert [s.session_id for s in bobs.items] == ["s1", "s3"]


async def test_the_agents_service_reads_a_callers_page_among_others_agents_in_one_round_trip(kernel: Kernel) -> None:
    # What ``GET /v1/agents`` runs with auth on: the caller's filter inside the kernel's query, on every backend.
    counted = CountingKernel(kernel)
    service, access = AgentRecords(counted, Access(AccessPolicy())), Access(AccessPolicy())
    puts = [agents(kernel).put(agent(f"other{n:03}"), owner=access.owner(CAROL)) for n in range(200)]
    puts.insert(150, agents(kernel).put(agent("mine"), owner=access.owner(ALICE)))
    await kernel.write(puts)
    counted.reset()
    page = await service.page(ALICE, 0, 20)
    assert ([a.agent_id for a in page.items], page.has_more) == (["mine"], False)
    assert (counted.reads, counted.round_trips) == (1, 1)
