"""The kernel contract: logs, history, chains, idempotency keys and leases, on every backend."""

from __future__ import annotations

import asyncio

import pytest
from kernel_contract_support import (  # noqa: F401  (fixtures)
    AGENT,
    ALICE,
    RESPONSE,
    SESSION,
    STEP,
    TURN,
    backend_fixture,
    kernel_fixture,
    one,
    tree,
    twin_fixture,
)

from ferryman.errors import NotFoundError
from ferryman.storage.kernel.model import LogEntry
from ferryman.storage.kernel.ops import (
    Append,
    Chain,
    CountStatus,
    Events,
    Get,
    GetMany,
    History,
    LogCount,
    Put,
    Rewrite,
)
from ferryman.storage.kernel.protocol import Kernel

pytestmark = pytest.mark.anyio

# -- logs --------------------------------------------------------------------------------------------------------


async def test_append_numbers_entries_from_zero(kernel: Kernel) -> None:
    await one(kernel, Put(RESPONSE, "r", {}))
    firsts = await kernel.write([Append(RESPONSE, "r", "events", ("a", "b")), Append(RESPONSE, "r", "events", ("c",))])
    later = await one(kernel, Append(RESPONSE, "r", "events", ("d",)))
    assert firsts + [later] == [0, 2, 3]
    got = await kernel.read([Events(RESPONSE, "r", "events"), LogCount(RESPONSE, "r", "events")])
    assert got == [[LogEntry(0, "a"), LogEntry(1, "b"), LogEntry(2, "c"), LogEntry(3, "d")], 4]


async def test_events_after_a_number_and_up_to_a_limit(kernel: Kernel) -> None:
    await one(kernel, Put(RESPONSE, "r", {}))
    await one(kernel, Append(RESPONSE, "r", "events", tuple(f"e{n}" for n in range(6))))
    got = await kernel.read(
        [
            Events(RESPONSE, "r", "events", after=2),
            Events(RESPONSE, "r", "events", after=0, limit=2),
            Events(RESPONSE, "r", "events", after=5),
        ]
    )
    assert got[0] == [LogEntry(3, "e3"), LogEntry(4, "e4"), LogEntry(5, "e5")]
    assert got[1] == [LogEntry(1, "e1"), LogEntry(2, "e2")]
    assert got[2] == []


async def test_a_records_channels_are_separate_logs(kernel: Kernel) -> None:
    await tree(kernel)
    await one(kernel, Append(TURN, "t1", "messages", ("m",)))
    got = await kernel.read(
        [LogCount(TURN, "t1", "events"), Events(TURN, "t1", "messages"), LogCount(TURN, "t2", "events")]
    )
    assert got == [2, [LogEntry(0, "m")], 0]


async def test_rewrite_replaces_a_log_and_numbers_it_again(kernel: Kernel) -> None:
    await tree(kernel)
    assert await one(kernel, Rewrite(TURN, "t1", "events", ("x",))) == 1
    assert await one(kernel, Append(TURN, "t1", "events", ("y",))) == 1
    assert (await kernel.read([Events(TURN, "t1", "events")]))[0] == [LogEntry(0, "x"), LogEntry(1, "y")]
    assert await one(kernel, Rewrite(TURN, "t1", "events", ())) == 0
    assert (await kernel.read([LogCount(TURN, "t1", "events")]))[0] == 0


async def test_append_to_a_missing_record_is_not_found(kernel: Kernel) -> None:
    with pytest.raises(NotFoundError, match="response 'gone' not found"):
        await one(kernel, Append(RESPONSE, "gone", "events", ("e",)))
    assert await kernel.read([Events(RESPONSE, "gone", "events"), LogCount(RESPONSE, "gone", "events")]) == [[], 0]


async def test_history_collects_the_logs_of_finished_records_through_one(kernel: Kernel) -> None:
    await one(kernel, Put(SESSION, "s", {}))
    await one(kernel, Put(SESSION, "other", {}))
    statuses = {"t1": "completed", "t2": "failed", "t3": "completed", "t4": "in_progress", "t5": "completed"}
    await kernel.write([Put(TURN, name, {}, parent="s", status=status) for name, status in statuses.items()])
    await one(kernel, Put(TURN, "x", {}, parent="other", status="completed"))
    await kernel.write([Append(TURN, name, "messages", (f"{name}a", f"{name}b")) for name in [*statuses, "x"]])
    await one(kernel, Append(TURN, "t3", "events", ("not a message",)))

    def flat(found: list[tuple[str, LogEntry]]) -> list[tuple[str, int, str]]:
        return [(record_id, entry.n, entry.body) for record_id, entry in found]

    through, everything, wider = await kernel.read(
        [
            History(TURN, "s", "messages", through="t4"),
            History(TURN, "s", "messages"),
            History(TURN, "s", "messages", statuses=frozenset({"completed", "failed"}), through="t3"),
        ]
    )
    assert flat(through) == [(n, i, f"{n}{c}") for n in ("t1", "t3", "t4") for i, c in enumerate("ab")]
    assert flat(everything) == [(n, i, f"{n}{c}") for n in ("t1", "t3", "t5") for i, c in enumerate("ab")]
    assert flat(wider) == [(n, i, f"{n}{c}") for n in ("t1", "t2", "t3") for i, c in enumerate("ab")]


async def test_history_through_a_missing_record_is_empty(kernel: Kernel) -> None:
    await tree(kernel)
    got = await kernel.read([History(TURN, "s1", "events", through="gone"), History(TURN, "s1", "events")])
    assert got[0] == [] and [entry.body for _, entry in got[1]] == ["e0", "e1"]


async def test_count_status_counts_a_parents_records_by_status(kernel: Kernel) -> None:
    await tree(kernel)
    await kernel.write(
        [
            Put(TURN, "t3", {}, parent="s1", status="completed"),
            Put(TURN, "t4", {}, parent="s1"),
            Put(STEP, "p3", {"pending": True}, parent="t1", status="done"),
            Put(STEP, "p4", {"pending": False}, parent="t1", status="done"),
            Put(STEP, "p5", {"pending": True}, parent="t1", status="waiting"),
        ]
    )
    got = await kernel.read(
        [
            CountStatus(TURN, "s1"),
            CountStatus(TURN, "s2"),
            CountStatus(STEP, "t1", where=("pending", "true")),
        ]
    )
    assert got == [{"completed": 2, "in_progress": 1}, {}, {"done": 1, "waiting": 1}]


async def test_chain_follows_an_index_newest_first(kernel: Kernel) -> None:
    await one(kernel, Put(RESPONSE, "r1", {}))
    for n in range(2, 5):
        await one(kernel, Put(RESPONSE, f"r{n}", {"previous_response_id": f"r{n - 1}"}))
    await one(kernel, Put(RESPONSE, "dangling", {"previous_response_id": "gone"}))
    found = await kernel.read(
        [
            Chain(RESPONSE, "r4", "previous_response_id", 10),
            Chain(RESPONSE, "r4", "previous_response_id", 2),
            Chain(RESPONSE, "r2", "previous_response_id", 10),
            Chain(RESPONSE, "dangling", "previous_response_id", 10),
            Chain(RESPONSE, "gone", "previous_response_id", 10),
        ]
    )
    assert [[rec.id for rec in chain] for chain in found] == [
        ["r4", "r3", "r2", "r1"],
        ["r4", "r3"],
        ["r2", "r1"],
        ["dangling"],
        [],
    ]
    assert found[0][1].body == {"previous_response_id": "r2"}


# -- leases ------------------------------------------------------------------------------------------------------


async def test_renew_moves_the_leases_that_are_held(kernel: Kernel) -> None:
    await kernel.write(
        [
            Put(AGENT, "held", {}, lease_until=10.0),
            Put(AGENT, "free", {}),
            Put(AGENT, "late", {}, lease_until=1.0),
        ]
    )
    assert sorted(await kernel.renew(AGENT, ["held", "free", "late", "gone"], 60.0)) == ["held", "late"]
    got = await kernel.read([GetMany(AGENT, ("held", "free", "late"))])
    assert [rec.lease_until for rec in got[0]] == [60.0, None, 60.0]
    assert await kernel.renew(AGENT, [], 70.0) == []


async def test_claim_expired_takes_the_ended_leases_once(kernel: Kernel) -> None:
    await tree(kernel)
    await kernel.write(
        [
            Put(TURN, "t3", {"v": 3}, parent="s2", status="in_progress", lease_until=99.0),
            Put(TURN, "t4", {}, parent="s2", status="queued"),
        ]
    )
    claimed = await kernel.claim_expired(TURN, 60.0, status="failed", lease_until=None, limit=10)
    assert [(rec.id, rec.status, rec.lease_until) for rec in claimed] == [("t2", "in_progress", 50.0)]
    assert await kernel.claim_expired(TURN, 60.0, status="failed", lease_until=None, limit=10) == []
    got = await kernel.read([Get(TURN, "t2"), Get(TURN, "t3")])
    assert (got[0].status, got[0].lease_until) == ("failed", None)
    assert (got[1].status, got[1].lease_until) == ("in_progress", 99.0)
    # The claim freed the session's slot.
    await one(kernel, Put(TURN, "t5", {}, parent="s1", status="in_progress"))


async def test_a_lease_ending_exactly_now_is_not_expired(kernel: Kernel) -> None:
    await one(kernel, Put(AGENT, "a", {}, lease_until=60.0))
    assert await kernel.claim_expired(AGENT, 60.0, status=None, lease_until=None, limit=5) == []
    assert [rec.id for rec in await kernel.claim_expired(AGENT, 60.5, status=None, lease_until=None, limit=5)] == ["a"]


async def test_claim_expired_may_keep_the_status_and_lease_again(kernel: Kernel) -> None:
    await kernel.write([Put(AGENT, f"a{n}", {}, status="ingesting", lease_until=float(n)) for n in range(5)])
    first = await kernel.claim_expired(AGENT, 10.0, status=None, lease_until=40.0, limit=3)
    second = await kernel.claim_expired(AGENT, 10.0, status=None, lease_until=40.0, limit=3)
    assert len(first) == 3 and len(second) == 2
    assert sorted(rec.id for rec in first + second) == [f"a{n}" for n in range(5)]
    [found] = await kernel.read([GetMany(AGENT, tuple(f"a{n}" for n in range(5)))])
    assert {(rec.status, rec.lease_until) for rec in found} == {("ingesting", 40.0)}
    assert await kernel.claim_expired(AGENT, 40.5, status="x", lease_until=None, limit=0) == []


async def test_concurrent_claimers_get_disjoint_records(kernel: Kernel, twin: Kernel) -> None:
    await kernel.write([Put(AGENT, f"a{n:02}", {}, lease_until=1.0) for n in range(30)])
    ones, twos = await asyncio.gather(
        kernel.claim_expired(AGENT, 5.0, status="claimed", lease_until=None, limit=20),
        twin.claim_expired(AGENT, 5.0, status="claimed", lease_until=None, limit=20),
    )
    first, second = [rec.id for rec in ones], [rec.id for rec in twos]
    assert not set(first) & set(second)
    assert sorted(first + second) == [f"a{n:02}" for n in range(30)]
    assert {rec.lease_until for rec in ones + twos} == {1.0}
