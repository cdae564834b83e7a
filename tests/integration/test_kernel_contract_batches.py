"""The kernel contract: atomic batches, access filters and round trips, on every backend."""

from __future__ import annotations

import random
from typing import Any

import pytest
from kernel_contract_support import (  # noqa: F401  (fixtures)
    AGENT,
    ALICE,
    BOB,
    CAROL,
    CONVERSATION,
    ITEM,
    RESPONSE,
    SCHEMA,
    SESSION,
    STEP,
    TURN,
    backend_fixture,
    kernel_fixture,
    one,
    page_ids,
    tree,
    twin_fixture,
)

from ferryman.errors import ConflictError, ForbiddenError, NotFoundError
from ferryman.storage.kernel.counting import CountingKernel
from ferryman.storage.kernel.filters import ALL, NOTHING, And, Filter, IdIn, Not, Or, Terms, admits
from ferryman.storage.kernel.model import Owner, Rec, owner_terms
from ferryman.storage.kernel.ops import (
    Append,
    Check,
    Delete,
    Events,
    Get,
    LogCount,
    Op,
    Page,
    Patch,
    Put,
    Rewrite,
)
from ferryman.storage.kernel.protocol import Kernel

pytestmark = pytest.mark.anyio

# -- batches: sequential and atomic ------------------------------------------------------------------------------


async def test_a_batch_sees_its_own_earlier_writes(kernel: Kernel) -> None:
    results = await kernel.write(
        [
            Put(AGENT, "a", {}),
            Put(SESSION, "s", {}, parent="a"),
            Put(TURN, "t", {}, parent="s", status="in_progress"),
            Append(TURN, "t", "events", ("e0", "e1")),
            Get(TURN, "t"),
            Page(SESSION, parent="a"),
            LogCount(TURN, "t", "events"),
            Patch(TURN, "t", status="completed", expect_status=frozenset({"in_progress"})),
            Put(TURN, "t2", {}, parent="s", status="in_progress"),
            Delete(AGENT, "a"),
            Get(TURN, "t"),
        ]
    )
    assert results[4].status == "in_progress" and [rec.id for rec in results[5].items] == ["s"]
    assert results[6:8] == [2, True] and results[9:] == [True, None]


async def test_a_parent_deleted_earlier_in_the_batch_is_missing(kernel: Kernel) -> None:
    await tree(kernel)
    with pytest.raises(NotFoundError):
        await kernel.write([Delete(AGENT, "a1"), Put(SESSION, "s9", {}, parent="a1")])
    assert await page_ids(kernel, Page(SESSION, parent="a1")) == ["s1"]


def _items(parent: str, *ids: str) -> list[Op]:
    return [Put(ITEM, item_id, {"n": n}, parent=parent) for n, item_id in enumerate(ids)]


async def test_many_records_under_one_parent_are_numbered_in_their_order(kernel: Kernel) -> None:
    await kernel.write([Put(CONVERSATION, "c", {}), Put(RESPONSE, "r", {})])
    ids = [f"i{n:03d}" for n in range(120)][::-1]  # more than one statement's rows, against their ids' order
    results = await kernel.write([*_items("c", *ids[:70]), *_items("r", "i1", "i2"), *_items("c", *ids[70:])])
    assert results == sorted(results) and len(set(results)) == len(results)
    assert await page_ids(kernel, Page(ITEM, parent="c")) == ids
    assert await page_ids(kernel, Page(ITEM, parent="r")) == ["i1", "i2"]


@pytest.mark.parametrize("taken", ["earlier", "repeated", "in a later statement"])
async def test_many_records_with_an_id_taken_write_nothing(kernel: Kernel, taken: str) -> None:
    await kernel.write([Put(CONVERSATION, "c", {}), *_items("c", "old")])
    before = await snapshot(kernel)
    ids = {  # the id the error names: the first taken
        "earlier": ["new", "old", "other"],
        "repeated": ["a", "a", "b"],
        "in a later statement": [*(f"u{n}" for n in range(60)), "u3", "u70"],
    }
    named = {"earlier": "old", "repeated": "a", "in a later statement": "u3"}
    with pytest.raises(ConflictError, match=f"item '{named[taken]}' already exists"):
        await kernel.write([Put(CONVERSATION, "c2", {}), *_items("c", *ids[taken])])
    assert await snapshot(kernel) == before


async def test_many_records_under_a_missing_parent_write_nothing(kernel: Kernel) -> None:
    before = await snapshot(kernel)
    with pytest.raises(NotFoundError):
        await kernel.write([Put(CONVERSATION, "c2", {}), *_items("gone", "a", "b")])
    assert await snapshot(kernel) == before


async def snapshot(kernel: Kernel) -> list[Any]:
    """Everything the atomicity tests' batches could have touched, read back."""
    pages = await kernel.read([Page(kind, parent=None) for kind in SCHEMA.kinds.values()])
    records = [rec for page in pages for rec in page.items]
    logs = [Events(SCHEMA[rec.kind], rec.id, channel) for rec in records for channel in SCHEMA[rec.kind].logs]
    return [records, *await kernel.read(logs)]


async def aborted_setup(kernel: Kernel) -> None:
    await tree(kernel)
    await kernel.write(
        [
            Put(CONVERSATION, "c1", {}, status="open"),
            Put(RESPONSE, "r1", {}),
            Append(RESPONSE, "r1", "events", ("r",)),
        ]
    )


EARLIER: dict[str, list[Op]] = {
    "put": [Put(AGENT, "a3", {"new": True}, owner=CAROL), Put(SESSION, "s3", {}, parent="a3")],
    "upsert": [Put(AGENT, "a1", {"name": "changed"}, status="x", mode="upsert")],
    "patch": [Patch(TURN, "t1", merge={"x": 1}, drop=("y",), status="failed", lease_until=1.0)],
    "append": [Append(TURN, "t1", "events", ("e2",)), Append(RESPONSE, "r1", "events", ("r2",))],
    "rewrite": [Rewrite(TURN, "t2", "messages", ("only",))],
    "delete": [Delete(AGENT, "a1"), Delete(RESPONSE, "r1")],
}
# Every kind of write in one batch (the deletes last, after the writes to what they delete).
EVERY_EARLIER = [op for name, ops in EARLIER.items() if name != "delete" for op in ops]
EVERY_EARLIER += EARLIER["delete"]
FAILING: dict[str, tuple[Op, type[Exception]]] = {
    "taken id": (Put(CONVERSATION, "c1", {}), ConflictError),
    "missing parent": (Put(SESSION, "s9", {}, parent="nobody"), NotFoundError),
    "check missing": (Check(AGENT, "nobody"), NotFoundError),
    "check unreadable": (Check(AGENT, "a2", read=Terms(frozenset({"p:key:carol"}))), NotFoundError),
    "check forbidden": (Check(AGENT, "a2", act=NOTHING), ForbiddenError),
    "expected status": (Patch(CONVERSATION, "c1", status="x", expect_status=frozenset({"closed"})), ConflictError),
    "patch missing": (Patch(CONVERSATION, "nobody", merge={}), NotFoundError),
    "append missing": (Append(RESPONSE, "nobody", "events", ("e",)), NotFoundError),
    "exclusive": (Put(TURN, "t9", {}, parent="s2", status="in_progress"), ConflictError),
}


@pytest.mark.parametrize("failing", list(FAILING))
async def test_a_batch_whose_last_op_fails_leaves_no_trace(kernel: Kernel, failing: str) -> None:
    await aborted_setup(kernel)
    await one(kernel, Put(TURN, "t8", {}, parent="s2", status="in_progress"))
    before = await snapshot(kernel)
    op, error = FAILING[failing]
    with pytest.raises(error):
        await kernel.write([*EVERY_EARLIER, op])
    assert await snapshot(kernel) == before


@pytest.mark.parametrize("earlier", list(EARLIER))
async def test_each_kind_of_write_is_undone_by_a_failing_batch(kernel: Kernel, earlier: str) -> None:
    await aborted_setup(kernel)
    before = await snapshot(kernel)
    with pytest.raises(ConflictError):
        await kernel.write([*EARLIER[earlier], Put(CONVERSATION, "c1", {})])
    assert await snapshot(kernel) == before
    await kernel.write(EARLIER[earlier])  # the same ops succeed alone: the failure was the last op's
    assert await snapshot(kernel) != before


# -- filters -----------------------------------------------------------------------------------------------------

OWNERS: list[Owner | None] = [ALICE, BOB, CAROL, None]
NAMED_FILTERS: dict[str, Filter] = {
    "all": ALL,
    "nothing": NOTHING,
    "terms": Terms(frozenset({"teams:green", "p:key:carol"})),
    "unowned": Terms(frozenset({"-"})),
    "ids": IdIn(frozenset({"o0", "o3", "missing"})),
    "not": Not(Terms(frozenset({"teams:red"}))),
    "and": And((Terms(frozenset({"teams:red", "teams:green"})), Not(IdIn(frozenset({"o1"}))))),
    "or": Or((Terms(frozenset({"p:key:alice"})), IdIn(frozenset({"o2"})))),
}


def expected_ids(flt: Filter, owners: list[Owner | None]) -> list[str]:
    return [f"o{n}" for n, owner in enumerate(owners) if admits(flt, owner_terms(owner), f"o{n}")]


@pytest.mark.parametrize("name", list(NAMED_FILTERS))
async def test_a_filter_selects_the_same_records_on_get_page_and_check(kernel: Kernel, name: str) -> None:
    flt = NAMED_FILTERS[name]
    await kernel.write([Put(AGENT, f"o{n}", {}, owner=owner) for n, owner in enumerate(OWNERS)])
    expected = expected_ids(flt, OWNERS)
    assert await page_ids(kernel, Page(AGENT, allow=flt)) == expected
    assert await page_ids(kernel, Page(AGENT, allow=flt, desc=True, limit=2)) == expected[::-1][:2]
    got = await kernel.read([Get(AGENT, f"o{n}", allow=flt) for n in range(len(OWNERS))])
    assert [rec.id for rec in got if rec is not None] == expected
    for n in range(len(OWNERS)):
        record_id = f"o{n}"
        if record_id in expected:
            await kernel.write([Check(AGENT, record_id, read=flt), Check(AGENT, record_id, act=flt)])
        else:
            with pytest.raises(NotFoundError):
                await one(kernel, Check(AGENT, record_id, read=flt))
            with pytest.raises(ForbiddenError):
                await one(kernel, Check(AGENT, record_id, act=flt))


async def test_check_requires_the_parent_when_given(kernel: Kernel) -> None:
    await tree(kernel)
    results = await kernel.write([Check(SESSION, "s1", parent="a1"), Check(SESSION, "s1")])
    assert results == [None, None]
    with pytest.raises(NotFoundError):
        await one(kernel, Check(SESSION, "s1", parent="a2"))
    with pytest.raises(NotFoundError):  # what the caller may not read it is not told exists, whatever it may do
        await one(kernel, Check(AGENT, "a1", read=NOTHING, act=NOTHING))


TEAMS, ROLES, PEOPLE = ("red", "blue", "green"), ("admin", "dev"), ("ann", "ben", "cat", "dee")
TERM_POOL = ["-", *(f"teams:{t}" for t in TEAMS), *(f"roles:{r}" for r in ROLES)]
TERM_POOL += [f"p:{kind}:{who}" for kind in ("api_key", "subject") for who in PEOPLE]


def random_owner(rng: random.Random) -> Owner | None:
    if rng.random() < 0.15:
        return None
    attributes = {
        "teams": tuple(rng.sample(TEAMS, rng.randint(0, 2))),
        "roles": tuple(rng.sample(ROLES, rng.randint(0, 1))),
    }
    return Owner(rng.choice(("api_key", "subject")), rng.choice(PEOPLE), {k: v for k, v in attributes.items() if v})


def random_filter(rng: random.Random, ids: list[str], depth: int = 0) -> Filter:
    shape = rng.choice(["terms", "terms", "ids", "all", "nothing"] + (["not", "and", "or"] if depth < 3 else []))
    if shape == "terms":
        return Terms(frozenset(rng.sample(TERM_POOL, rng.randint(1, 3))))
    if shape == "ids":
        return IdIn(frozenset(rng.sample(ids, rng.randint(1, 6))))
    if shape == "all":
        return ALL
    if shape == "nothing":
        return NOTHING
    if shape == "not":
        return Not(random_filter(rng, ids, depth + 1))
    parts = tuple(random_filter(rng, ids, depth + 1) for _ in range(rng.randint(1, 3)))
    return And(parts) if shape == "and" else Or(parts)


async def test_filtered_pages_agree_with_admits_for_random_owners_and_filters(kernel: Kernel) -> None:
    rng = random.Random(22)
    owners = [random_owner(rng) for _ in range(60)]
    await kernel.write([Put(AGENT, f"o{n}", {}, owner=owner) for n, owner in enumerate(owners)])
    ids = [f"o{n}" for n in range(len(owners))]
    filters = [random_filter(rng, ids) for _ in range(150)]
    pages = await kernel.read([Page(AGENT, allow=flt) for flt in filters])
    for flt, page in zip(filters, pages, strict=True):
        assert [rec.id for rec in page.items] == expected_ids(flt, owners), flt
    shallow = [Page(AGENT, allow=flt, desc=True, limit=5, offset=1) for flt in filters[:40]]
    for op, page in zip(shallow, await kernel.read(shallow), strict=True):
        expected = expected_ids(op.allow, owners)[::-1][1:]
        assert ([rec.id for rec in page.items], page.has_more) == (expected[:5], len(expected) > 5), op.allow


async def test_a_page_of_one_owner_among_many_of_another_is_one_round_trip(kernel: Kernel) -> None:
    def owner_of(n: int) -> Owner:
        return ALICE if 1000 <= n < 1025 else BOB

    puts = [Put(AGENT, f"a{n:04}", {"n": n}, owner=owner_of(n)) for n in range(2025)]
    for start in range(0, len(puts), 500):
        await kernel.write(puts[start : start + 500])
    counted = CountingKernel(kernel)
    mine = Terms(frozenset({"p:key:alice"}))
    granted = Or((mine, IdIn(frozenset({"a0007", "a2020"}))))
    first, last, shared = await counted.read(
        [
            Page(AGENT, allow=mine, limit=20),
            Page(AGENT, allow=mine, limit=20, desc=True),
            Page(AGENT, allow=granted, limit=20, after="a1003"),
        ]
    )
    assert counted.round_trips == counted.reads == 1
    assert [rec.id for rec in first.items] == [f"a{n:04}" for n in range(1000, 1020)] and first.has_more
    assert [rec.id for rec in last.items] == [f"a{n:04}" for n in range(1024, 1004, -1)] and last.has_more
    assert [rec.id for rec in shared.items] == [*(f"a{n:04}" for n in range(1004, 1025)), "a2020"][:20]
    assert shared.has_more and all(rec.owner == ALICE for rec in first.items)


async def test_the_counting_kernel_counts_each_kind_of_call(kernel: Kernel) -> None:
    counted = CountingKernel(kernel)
    await counted.write([Put(AGENT, "a", {}, lease_until=1.0)])
    await counted.read([Get(AGENT, "a")])
    await counted.read([Get(AGENT, "a")])
    await counted.renew(AGENT, ["a"], 2.0)
    assert await counted.claim_expired(AGENT, 5.0, status=None, lease_until=None, limit=1)
    assert (counted.writes, counted.reads, counted.renews, counted.claims, counted.round_trips) == (1, 2, 1, 1, 5)
    counted.reset()
    assert counted.round_trips == 0


def model_page(op: Page, records: list[Rec]) -> tuple[list[str], bool]:
    """What ``op`` answers over ``records`` (in creation order), computed here from the docstrings."""
    slot = None if op.where is None else op.kind.index_slot(op.where[0])
    found = [
        rec
        for rec in records
        if (op.parent is None or rec.parent == op.parent)
        and (slot is None or op.where is None or op.kind.index_values(rec.body)[slot] == op.where[1])
        and admits(op.allow, owner_terms(rec.owner), rec.id)
        and (op.statuses is None or rec.status in op.statuses)
        and (op.since is None or rec.at >= op.since)
        and (op.until is None or rec.at < op.until)
    ]
    if op.desc:
        found.reverse()
    if op.after is not None:
        mark = next(rec.seq for rec in records if rec.id == op.after)
        found = [rec for rec in found if (rec.seq < mark if op.desc else rec.seq > mark)]
    found = found[op.offset :]
    limit = len(found) if op.limit is None else op.limit
    return [rec.id for rec in found[:limit]], len(found) > limit


async def test_pages_combining_every_option_agree_with_a_model(kernel: Kernel) -> None:
    rng = random.Random(2022)
    await kernel.write([Put(AGENT, "a", {}), Put(SESSION, "s", {}, parent="a")])
    turns = ["t0", "t1", "t2"]
    await kernel.write([Put(TURN, turn, {}, parent="s") for turn in turns])
    puts = []
    for n in range(80):
        pending = rng.choice([True, False, "x", None])
        puts.append(
            Put(
                STEP,
                f"p{n:02}",
                {} if pending is None else {"pending": pending},
                parent=rng.choice([*turns, ""]),
                owner=random_owner(rng),
                status=rng.choice([None, "done", "waiting"]),
                at=float(rng.randint(0, 9)),
            )
        )
    await kernel.write(puts)
    [listed] = await kernel.read([Page(STEP, parent=None)])
    records = listed.items
    assert [rec.id for rec in records] == [put.id for put in puts]
    ids = [rec.id for rec in records]
    ops = [
        Page(
            STEP,
            parent=rng.choice([None, "", *turns]),
            where=rng.choice([None, ("pending", "true"), ("pending", "false"), ("pending", "x")]),
            allow=random_filter(rng, ids) if rng.random() < 0.6 else ALL,
            statuses=rng.choice([None, frozenset({"done"}), frozenset({"done", "waiting"})]),
            since=rng.choice([None, 3.0]),
            until=rng.choice([None, 7.0]),
            after=rng.choice([None, rng.choice(ids)]),
            offset=rng.choice([0, 0, 2]),
            limit=rng.choice([None, 1, 4, 10]),
            desc=rng.random() < 0.5,
        )
        for _ in range(200)
    ]
    pages = await kernel.read(ops)
    for op, page in zip(ops, pages, strict=True):
        assert ([rec.id for rec in page.items], page.has_more) == model_page(op, records), op
