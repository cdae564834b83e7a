"""Agents as each caller sees them (``services.agent_records``): owners, paging, the access step and its audit.

Moved here from the storage contract when agents left the ``Store`` protocol for the kernel: the paging
cases run on the memory kernel (every kernel pages alike: ``test_kernel_contract``, ``test_domain_agents``),
and a caller's page among many agents of others is one read of the kernel, filtered there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from audit_capture import audit_of
from ferryman.api.agents import Agent, AgentConfig
from ferryman.auth.policy import ACTIONS, AccessPolicy, parse_policy
from ferryman.auth.principal import Principal, PrincipalKind
from ferryman.errors import ConflictError, ForbiddenError, NotFoundError
from ferryman.services.access import Access
from ferryman.services.agent_records import AgentRecords
from ferryman.storage.domain.kinds import SCHEMA
from ferryman.storage.kernel.counting import CountingKernel
from ferryman.storage.kernel.memory import MemoryKernel

pytestmark = pytest.mark.anyio

ALICE = Principal(PrincipalKind.SUBJECT, "alice", {"teams": ("red",)})
BOB = Principal(PrincipalKind.API_KEY, "bob", {"teams": ("red",)})
CAROL = Principal(PrincipalKind.SUBJECT, "carol", {"teams": ("blue",)})
WHEN = datetime(2026, 11, 26, 9, 30, tzinfo=UTC)
TEAM_READS = parse_policy(
    [
        {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
        {"permit": {"actions": ["read"]}, "when": "user in owners teams"},
    ]
)


def agent(agent_id: str) -> Agent:
    return Agent(agent_id=agent_id, agent_config=AgentConfig(model="m", instructions="be brief"), created_at=WHEN)


@pytest.fixture()
async def kernel() -> AsyncIterator[CountingKernel]:
    counted = CountingKernel(MemoryKernel(SCHEMA))
    await counted.open()
    try:
        yield counted
    finally:
        await counted.close()


async def test_an_agent_reads_back_as_created_with_its_creator_as_owner(kernel: CountingKernel) -> None:
    agents = AgentRecords(kernel, Access(AccessPolicy()))
    await agents.create(ALICE, agent("a1"))
    found = await agents.stored(ALICE, "a1")
    assert found.value == agent("a1") and found.rec.owner == Access(AccessPolicy()).owner(ALICE)
    assert await agents.get(None, "a1") == agent("a1")
    with pytest.raises(ConflictError, match="^agent 'a1' already exists$"):
        await agents.create(BOB, agent("a1"))


async def test_an_unknown_agent_is_not_found(kernel: CountingKernel) -> None:
    agents = AgentRecords(kernel, Access(AccessPolicy()))
    with pytest.raises(NotFoundError, match="^agent 'nope' not found$"):
        await agents.get(ALICE, "nope")
    with pytest.raises(NotFoundError, match="^agent 'nope' not found$"):
        await agents.stored(None, "nope", "delete")
    assert await agents.delete(None, "nope") is False


async def test_agents_are_listed_in_creation_order_by_pages(kernel: CountingKernel) -> None:
    agents = AgentRecords(kernel, Access(AccessPolicy()))
    ids = [f"a{n}" for n in (3, 1, 4, 0, 2)]  # created in this order, not their ids'
    for agent_id in ids:
        await agents.create(ALICE, agent(agent_id))
    pages = [await agents.page(ALICE, start, 2) for start in (0, 2, 4)]
    assert [[a.agent_id for a in page.items] for page in pages] == [ids[:2], ids[2:4], ids[4:]]
    assert [page.has_more for page in pages] == [True, True, False]
    everything, rest = await agents.page(ALICE, 0, None), await agents.page(None, 1, None)
    assert [a.agent_id for a in everything.items] == ids and not everything.has_more
    assert [a.agent_id for a in rest.items] == ids[1:] and not rest.has_more
    exact, beyond = await agents.page(ALICE, 0, 5), await agents.page(ALICE, 5, 10)
    assert [a.agent_id for a in exact.items] == ids and not exact.has_more
    assert beyond.items == [] and not beyond.has_more


async def test_a_callers_page_among_many_agents_of_others_is_one_filtered_read(kernel: CountingKernel) -> None:
    agents = AgentRecords(kernel, Access(AccessPolicy()))
    mine = []
    for n in range(300):
        await agents.create(CAROL, agent(f"other{n:03}"))
        if n % 100 == 99:
            mine.append(f"mine{n}")
            await agents.create(ALICE, agent(mine[-1]))
    kernel.reset()
    page = await agents.page(ALICE, 0, 2)
    assert [a.agent_id for a in page.items] == mine[:2] and page.has_more
    last = await agents.page(ALICE, 2, 2)
    assert [a.agent_id for a in last.items] == mine[2:] and not last.has_more
    assert (kernel.reads, kernel.round_trips) == (2, 2)  # one read a page: no batches filtered in Python


async def test_another_callers_agent_is_missing_to_a_caller_and_the_denial_audited(
    kernel: CountingKernel, caught: pytest.LogCaptureFixture
) -> None:
    agents = AgentRecords(kernel, Access(AccessPolicy()))
    await agents.create(ALICE, agent("a1"))
    caught.clear()
    with pytest.raises(NotFoundError, match="^agent 'a1' not found$"):
        await agents.get(CAROL, "a1")
    with pytest.raises(NotFoundError, match="^agent 'a1' not found$"):
        await agents.stored(CAROL, "a1", "delete")
    assert (await agents.page(CAROL, 0, None)).items == []
    assert audit_of(caught) == [
        ("denied", "sub:carol", "read", "agent::a1"),
        ("denied", "sub:carol", "delete", "agent::a1"),
    ]


async def test_a_missing_agent_is_audited_as_a_denial_for_a_caller_the_policy_limits(
    kernel: CountingKernel, caught: pytest.LogCaptureFixture
) -> None:
    # A caller cannot tell another's record from none by the answer, nor an auditor by the audit.
    agents = AgentRecords(kernel, Access(AccessPolicy()))
    everyone = AgentRecords(kernel, Access(parse_policy([{"permit": {"actions": list(ACTIONS)}}])))
    for records, who in ((agents, CAROL), (agents, None), (everyone, CAROL)):
        with pytest.raises(NotFoundError, match="^agent 'gone' not found$"):
            await records.stored(who, "gone", "delete")
    assert audit_of(caught) == [("denied", "sub:carol", "delete", "agent::gone")]


async def test_an_agent_a_caller_may_read_but_not_delete_is_forbidden_and_a_kept_one_is_checked_again(
    kernel: CountingKernel, caught: pytest.LogCaptureFixture
) -> None:
    agents = AgentRecords(kernel, Access(TEAM_READS))
    await agents.create(ALICE, agent("a1"))
    found = await agents.stored(BOB, "a1")  # a team mate reads it
    caught.clear()
    with pytest.raises(ForbiddenError, match="^not allowed to delete agent 'a1'$"):
        await agents.stored(BOB, "a1", "delete")
    kernel.reset()
    agents.allow(ALICE, found, "delete")
    with pytest.raises(NotFoundError, match="^agent 'a1' not found$"):
        agents.allow(CAROL, found)  # a kept record, checked for each caller without reading it again
    assert kernel.round_trips == 0
    assert audit_of(caught) == [
        ("denied", "key:bob", "delete", "agent::a1"),
        ("denied", "sub:carol", "read", "agent::a1"),
    ]


async def test_creates_and_deletes_are_audited_and_a_refused_create_stores_nothing(
    kernel: CountingKernel, caught: pytest.LogCaptureFixture
) -> None:
    nobody_creates = parse_policy([{"permit": {"actions": ["read", "update", "delete"]}, "when": "user is owner"}])
    agents = AgentRecords(kernel, Access(AccessPolicy()))
    await agents.create(ALICE, agent("a1"))
    assert await agents.delete(ALICE, "a1") is True
    with pytest.raises(ForbiddenError, match="^not allowed to create agent 'a2'$"):
        await AgentRecords(kernel, Access(nobody_creates)).create(BOB, agent("a2"))
    assert await agents.records.all() == []
    assert audit_of(caught) == [
        ("create", "sub:alice", "create", "agent::a1"),
        ("delete", "sub:alice", "delete", "agent::a1"),
        ("denied", "key:bob", "create", "agent::a2"),
    ]
