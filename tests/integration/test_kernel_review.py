"""Random batches run on every backend and on the in-memory reference kernel answer and leave the same.

Each batch mixes creates, upserts, patches (exclusive statuses included), deletes that cascade, logs and
reads over a few ids, so that one batch often creates, deletes and creates the same id again, moves a parent's
exclusive slot, or fails half-way; every backend must then raise what the reference raises and keep nothing.
Then the cases a review found: a child under two parent kinds sharing an id, PostgreSQL races (a sweep and a
put against another transaction's uncommitted work), and values Redis's scripts once failed on mid-batch.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import pytest
from kernel_backends import postgres_kernel
from kernel_contract_support import (  # noqa: F401  (fixtures)
    AGENT,
    ALICE,
    BOB,
    CONVERSATION,
    ITEM,
    RESPONSE,
    SCHEMA,
    SESSION,
    STEP,
    TURN,
    backend_fixture,
    kernel_fixture,
)
from storage_backends import POSTGRES_URL

from ferryman.errors import NotFoundError
from ferryman.storage.kernel.filters import ALL, And, Filter, IdIn, Not, Or, Terms
from ferryman.storage.kernel.memory import MemoryKernel
from ferryman.storage.kernel.model import Kind, Rec
from ferryman.storage.kernel.ops import (
    Append,
    Chain,
    Check,
    CountStatus,
    Delete,
    Events,
    Get,
    History,
    Op,
    Page,
    Patch,
    Put,
    Rewrite,
)
from ferryman.storage.kernel.protocol import Kernel

pytestmark = pytest.mark.anyio

IDS = {AGENT: ("a1", "a2"), SESSION: ("s1", "s2", "s3"), TURN: ("t1", "t2", "t3"), STEP: ("p1", "p2")}
IDS |= {CONVERSATION: ("c1",), RESPONSE: ("r1",), ITEM: ("i1", "i2")}
PARENTS = {SESSION: ("", "a1", "a2"), TURN: ("s1", "s2", "s3"), STEP: ("t1", "t2"), ITEM: ("c1", "r1", "")}
STATUSES = (None, "in_progress", "completed", "queued")
MANY_TERMS = Terms(frozenset({"teams:green", *(f"p:key:n{n}" for n in range(12))}))  # more than a few
FILTERS: tuple[Filter, ...] = (
    ALL,
    Terms(frozenset({"p:key:alice"})),
    Not(IdIn(frozenset({"t1", "a1"}))),
    MANY_TERMS,
    Or((MANY_TERMS, IdIn(frozenset({"s2", "t3", "i1"})))),
    Terms(frozenset()),
    Or((IdIn(frozenset()), Terms(frozenset({"-"})))),
    And((Not(MANY_TERMS), Terms(frozenset({"-", "roles:admin"})))),
)


def _put(rng: random.Random, kind: Kind) -> Put:
    body = {"n": rng.randint(0, 3), "pending": rng.choice([True, False])}
    if kind is RESPONSE:
        body["previous_response_id"] = "r1"
    return Put(
        kind,
        rng.choice(IDS[kind]),
        body,
        parent=rng.choice(PARENTS.get(kind, ("",))),
        owner=rng.choice([ALICE, BOB, None]),
        mode=rng.choice(["create", "create", "upsert"]),
        status=rng.choice(STATUSES),
        lease_until=rng.choice([None, 5.0, 7.0]),
        at=float(rng.randint(0, 3)),
    )


def random_op(rng: random.Random) -> Op:
    kind = rng.choice(list(IDS))
    record_id = rng.choice(IDS[kind])
    shape = rng.choice(["put", "put", "put", "patch", "patch", "delete", "log", "check", "read"])
    if shape == "put":
        return _put(rng, kind)
    if shape == "patch":
        return Patch(
            kind,
            record_id,
            merge={"n": rng.randint(0, 3)},
            drop=rng.choice([(), ("pending",)]),
            status=rng.choice(STATUSES),
            expect_status=rng.choice([None, frozenset({"in_progress"}), frozenset({"queued", "completed"})]),
            required=rng.random() < 0.5,
        )
    if shape == "delete":
        return Delete(kind, record_id)
    if shape == "log":
        turn = rng.choice(IDS[TURN])
        entries = tuple(f"e{n}" for n in range(rng.randint(0, 2)))
        return rng.choice([Append, Rewrite])(TURN, turn, rng.choice(TURN.logs), entries)
    if shape == "check":
        return Check(kind, record_id, read=rng.choice(FILTERS), act=rng.choice(FILTERS))
    return rng.choice(
        [
            Get(kind, record_id, allow=rng.choice(FILTERS)),
            Page(kind, parent=None, allow=rng.choice(FILTERS), desc=rng.random() < 0.5),
            Page(
                kind,
                parent=rng.choice([None, "", *PARENTS.get(kind, ())]),
                allow=rng.choice(FILTERS),
                statuses=rng.choice([None, frozenset({"queued", "in_progress"})]),
                after=rng.choice([None, record_id]),
                offset=rng.choice([0, 1]),
                limit=rng.choice([None, 0, 1, 2]),
                desc=rng.random() < 0.5,
            ),
            Chain(RESPONSE, "r1", "previous_response_id", 3),
            CountStatus(TURN, rng.choice(IDS[SESSION])),
            Events(TURN, rng.choice(IDS[TURN]), "events"),
            History(TURN, rng.choice(IDS[SESSION]), "events", through=rng.choice([None, "t2"])),
        ]
    )


def _rec(rec: Rec) -> tuple[Any, ...]:
    """A record but its seq (backends may skip numbers; their order is compared through the pages)."""
    return (rec.kind, rec.id, rec.parent, rec.at, rec.owner, rec.body, rec.status, rec.lease_until)


def _answer(result: Any) -> Any:
    if isinstance(result, Rec):
        return _rec(result)
    if isinstance(result, list):
        return [_answer(item) for item in result]
    if hasattr(result, "items") and hasattr(result, "has_more"):
        return ([_rec(rec) for rec in result.items], result.has_more)
    return result


async def _state(kernel: Kernel) -> list[Any]:
    pages = await kernel.read([Page(kind, parent=None) for kind in SCHEMA.kinds.values()])
    logs = [Events(TURN, turn, channel) for turn in IDS[TURN] for channel in TURN.logs]
    holders = [CountStatus(TURN, session) for session in IDS[SESSION]]
    return [_answer(pages), *await kernel.read([*logs, *holders])]


async def _outcome(kernel: Kernel, batch: list[Op]) -> Any:
    try:
        results = await kernel.write(batch)
    except Exception as exc:  # noqa: BLE001  # the error's type is what is compared
        return type(exc).__name__
    return [None if isinstance(op, Put) else _answer(result) for op, result in zip(batch, results, strict=True)]


async def test_random_batches_do_what_the_reference_does(kernel: Kernel) -> None:
    rng = random.Random(2207)
    reference = MemoryKernel(SCHEMA)
    for round_ in range(600):
        batch = [random_op(rng) for _ in range(rng.randint(1, 7))]
        expected = await _outcome(reference, batch)
        assert await _outcome(kernel, batch) == expected, (round_, batch)
        if rng.random() < 0.1:
            sweep = {"status": rng.choice([None, "in_progress", "queued"]), "lease_until": rng.choice([None, 9.0])}
            sweep["limit"] = rng.randint(1, 3)
            claimed = await kernel.claim_expired(TURN, 6.0, **sweep)  # type: ignore[arg-type]
            assert [_rec(rec) for rec in claimed] == [
                _rec(rec)
                for rec in await reference.claim_expired(TURN, 6.0, **sweep)  # type: ignore[arg-type]
            ]
        if rng.random() < 0.1:
            ids = rng.sample(IDS[TURN], 2)
            assert await kernel.renew(TURN, ids, 3.0) == await reference.renew(TURN, ids, 3.0)
        assert await _state(kernel) == await _state(reference), (round_, batch)


async def test_deleting_either_parent_of_the_same_id_deletes_the_child(kernel: Kernel) -> None:
    await kernel.write([Put(CONVERSATION, "x", {}), Put(RESPONSE, "x", {}), Put(ITEM, "i", {}, parent="x")])
    assert await kernel.write([Delete(RESPONSE, "x")]) == [True]
    assert await kernel.read([Get(ITEM, "i")]) == [None]


async def _wait_until_blocked_by(url: str, pid: int) -> None:
    """Return once some session waits on a lock the session ``pid`` holds."""

    watcher = await asyncpg.connect(url)
    try:
        query = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))"
        while not await watcher.fetchval(query, pid):  # noqa: ASYNC110  # no event tells of a lock wait
            await anyio.sleep(0.01)
    finally:
        await watcher.close()


async def test_a_sweep_racing_another_for_a_slot_leaves_the_record_unclaimed(tmp_path: Path) -> None:
    """On PostgreSQL a sweep waits on a slot another sweep took but has not committed, then skips the record."""

    async with postgres_kernel(tmp_path, SCHEMA) as kernel:
        queued = [Put(TURN, turn, {}, parent="s", status="queued", lease_until=1.0) for turn in ("q1", "q2")]
        await kernel.write([Put(AGENT, "a", {}), Put(SESSION, "s", {}, parent="a"), *queued])
        schema = kernel.driver._schema  # type: ignore[attr-defined]
        other = await asyncpg.connect(POSTGRES_URL, server_settings={"search_path": schema})
        claimed: list[Rec] = []

        async def sweep() -> None:
            claimed.extend(await kernel.claim_expired(TURN, 5.0, status="in_progress", lease_until=50.0, limit=10))

        try:
            # What another sweep has done to q1 before it commits: q2 is the one expired record left unlocked.
            await other.execute("BEGIN")
            await other.execute(
                "UPDATE records SET status = 'in_progress', slot = 's', lease_until = 100 "
                "WHERE kind = 'turn' AND id = 'q1'"
            )
            async with anyio.create_task_group() as group:
                group.start_soon(sweep)
                await _wait_until_blocked_by(POSTGRES_URL, other.get_server_pid())  # on q1's hold of the slot
                await other.execute("COMMIT")
        finally:
            await other.close()
        assert claimed == []
        [q2] = await kernel.read([Get(TURN, "q2")])
        assert q2 is not None and q2.status == "queued"


async def test_a_put_under_a_parent_deleted_meanwhile_is_not_found(tmp_path: Path) -> None:
    """On PostgreSQL a put whose parent another transaction deletes before committing finds it missing."""

    async with postgres_kernel(tmp_path, SCHEMA) as kernel:
        await kernel.write([Put(AGENT, "a", {})])
        schema = kernel.driver._schema  # type: ignore[attr-defined]
        other = await asyncpg.connect(POSTGRES_URL, server_settings={"search_path": schema})
        raised: list[BaseException] = []

        async def put() -> None:
            try:
                await kernel.write([Put(SESSION, "s", {}, parent="a")])
            except Exception as exc:  # noqa: BLE001  # compared below
                raised.append(exc)

        try:
            await other.execute("BEGIN")
            await other.execute("DELETE FROM records WHERE kind = 'agent' AND id = 'a'")
            async with anyio.create_task_group() as group:
                group.start_soon(put)
                await _wait_until_blocked_by(POSTGRES_URL, other.get_server_pid())  # on the parent's row
                await other.execute("COMMIT")
        finally:
            await other.close()
        assert [type(exc) for exc in raised] == [NotFoundError], raised


async def test_events_far_past_the_end_are_none(kernel: Kernel) -> None:
    await kernel.write([Put(AGENT, "a", {}), Put(SESSION, "s", {}, parent="a"), Put(TURN, "t", {}, parent="s")])
    await kernel.write([Append(TURN, "t", "events", ("e0", "e1"))])
    far = 2**62
    found = await kernel.write([Events(TURN, "t", "events", after=far), Events(TURN, "t", "events", limit=far)])
    assert [[entry.body for entry in entries] for entries in found] == [[], ["e0", "e1"]]


async def test_an_upsert_racing_a_create_of_its_id_updates_it(tmp_path: Path) -> None:
    """On PostgreSQL an upsert of an id another transaction creates meanwhile replaces that record's body."""
    async with postgres_kernel(tmp_path, SCHEMA) as kernel:
        schema = kernel.driver._schema  # type: ignore[attr-defined]
        other = await asyncpg.connect(POSTGRES_URL, server_settings={"search_path": schema})
        raised: list[BaseException] = []

        async def upsert() -> None:
            try:
                await kernel.write([Put(AGENT, "a", {"by": "upsert"}, mode="upsert")])
            except Exception as exc:  # noqa: BLE001  # compared below
                raised.append(exc)

        try:
            await other.execute("BEGIN")
            await other.execute(
                "INSERT INTO records (kind, id, parent, body, at) VALUES ('agent', 'a', '', '{\"by\": \"other\"}', 1)"
            )
            async with anyio.create_task_group() as group:
                group.start_soon(upsert)
                await _wait_until_blocked_by(POSTGRES_URL, other.get_server_pid())  # on the taken id
                await other.execute("COMMIT")
        finally:
            await other.close()
        assert raised == []
        [made] = await kernel.read([Get(AGENT, "a")])
        assert made is not None and made.body == {"by": "upsert"} and made.at == 1.0
