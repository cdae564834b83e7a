"""The kernel contract: records (put, get, pages, patch, exclusive statuses, delete), on every backend."""

from __future__ import annotations

import time

import pytest
from kernel_contract_support import (  # noqa: F401  (fixtures)
    AGENT,
    ALICE,
    BOB,
    CAROL,
    CONVERSATION,
    ITEM,
    RESPONSE,
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

from ferryman.errors import ConflictError, NotFoundError
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import Kind, Rec
from ferryman.storage.kernel.ops import (
    Append,
    Delete,
    Events,
    Get,
    GetMany,
    LogCount,
    Page,
    Patch,
    Put,
)
from ferryman.storage.kernel.protocol import Kernel

pytestmark = pytest.mark.anyio

# -- Put and Get -------------------------------------------------------------------------------------------------


async def test_a_created_record_reads_back_whole(kernel: Kernel) -> None:
    seq = await one(
        kernel, Put(AGENT, "a1", {"name": "x", "n": [1, {"k": None}]}, owner=ALICE, status="ready", at=1000.5)
    )
    [rec] = await kernel.read([Get(AGENT, "a1")])
    assert rec == Rec("agent", "a1", "", seq, 1000.5, ALICE, {"name": "x", "n": [1, {"k": None}]}, "ready", None)


async def test_owners_round_trip_with_their_attributes(kernel: Kernel) -> None:
    await kernel.write([Put(AGENT, "a", {}, owner=ALICE), Put(AGENT, "b", {}, owner=CAROL), Put(AGENT, "c", {})])
    found = await kernel.read([GetMany(AGENT, ("a", "b", "c"))])
    assert [rec.owner for rec in found[0]] == [ALICE, CAROL, None]


async def test_the_creation_time_defaults_to_now(kernel: Kernel) -> None:
    before = time.time()
    await one(kernel, Put(AGENT, "a", {}))
    [rec] = await kernel.read([Get(AGENT, "a")])
    assert before - 1 <= rec.at <= time.time() + 1


async def test_creating_a_taken_id_conflicts(kernel: Kernel) -> None:
    await one(kernel, Put(AGENT, "a", {"v": 1}))
    with pytest.raises(ConflictError):
        await one(kernel, Put(AGENT, "a", {"v": 2}))
    [rec] = await kernel.read([Get(AGENT, "a")])
    assert rec.body == {"v": 1}


async def test_the_same_id_in_two_kinds_is_two_records(kernel: Kernel) -> None:
    await kernel.write([Put(AGENT, "x", {"k": "agent"}), Put(CONVERSATION, "x", {"k": "conversation"})])
    got = await kernel.read([Get(AGENT, "x"), Get(CONVERSATION, "x")])
    assert [rec.body["k"] for rec in got] == ["agent", "conversation"]


async def test_seq_grows_across_kinds_and_batches(kernel: Kernel) -> None:
    first = await kernel.write([Put(AGENT, "a", {}), Put(CONVERSATION, "c", {})])
    second = await one(kernel, Put(RESPONSE, "r", {}))
    assert first[0] < first[1] < second


async def test_upsert_replaces_the_body_status_and_lease_and_keeps_the_rest(kernel: Kernel) -> None:
    created = await one(kernel, Put(AGENT, "a", {"v": 1, "old": True}, owner=ALICE, status="s1", at=10.0))
    await one(kernel, Put(CONVERSATION, "c", {}))
    again = await one(
        kernel, Put(AGENT, "a", {"v": 2}, owner=BOB, status="s2", lease_until=99.0, at=20.0, mode="upsert")
    )
    [rec] = await kernel.read([Get(AGENT, "a")])
    assert again == created
    assert rec == Rec("agent", "a", "", created, 10.0, ALICE, {"v": 2}, "s2", 99.0)


async def test_upsert_creates_a_missing_record(kernel: Kernel) -> None:
    seq = await one(kernel, Put(AGENT, "a", {"v": 1}, owner=CAROL, mode="upsert"))
    [rec] = await kernel.read([Get(AGENT, "a")])
    assert (rec.seq, rec.owner, rec.body) == (seq, CAROL, {"v": 1})


async def test_a_parent_must_exist(kernel: Kernel) -> None:
    with pytest.raises(NotFoundError, match="agent 'nope' not found"):
        await one(kernel, Put(SESSION, "s", {}, parent="nope"))
    assert await kernel.read([Get(SESSION, "s")]) == [None]


async def test_a_parent_of_another_kind_does_not_count(kernel: Kernel) -> None:
    await one(kernel, Put(CONVERSATION, "c", {}))
    with pytest.raises(NotFoundError):
        await one(kernel, Put(SESSION, "s", {}, parent="c"))


async def test_a_child_may_belong_to_any_declared_parent_kind_or_none(kernel: Kernel) -> None:
    await kernel.write([Put(CONVERSATION, "c", {}), Put(RESPONSE, "r", {})])
    await kernel.write([Put(ITEM, "i1", {}, parent="c"), Put(ITEM, "i2", {}, parent="r"), Put(SESSION, "s", {})])
    got = await kernel.read([GetMany(ITEM, ("i1", "i2")), Get(SESSION, "s")])
    assert [rec.parent for rec in got[0]] == ["c", "r"] and got[1].parent == ""


async def test_a_returned_body_is_a_copy(kernel: Kernel) -> None:
    body = {"list": [1]}
    await one(kernel, Put(AGENT, "a", body))
    body["list"].append(2)
    [rec] = await kernel.read([Get(AGENT, "a")])
    rec.body["list"].append(3)
    assert (await kernel.read([Get(AGENT, "a")]))[0].body == {"list": [1]}


async def test_get_misses_a_missing_record_another_parents_and_one_allow_excludes(kernel: Kernel) -> None:
    await tree(kernel)
    got = await kernel.read(
        [
            Get(AGENT, "zz"),
            Get(SESSION, "s1", parent="a2"),
            Get(SESSION, "s1", parent="a1"),
            Get(AGENT, "a1", allow=Terms(frozenset({"p:sub:bob"}))),
            Get(AGENT, "a1", allow=Terms(frozenset({"teams:blue"}))),
            Get(SESSION, "s0", parent=""),
            Get(SESSION, "s1", parent=""),
        ]
    )
    assert got[5].id == "s0" and got[6] is None
    assert got[0] is None and got[1] is None and got[3] is None
    assert got[2].id == "s1" and got[4].id == "a1"


async def test_get_many_returns_those_that_exist_in_the_order_asked(kernel: Kernel) -> None:
    await kernel.write([Put(AGENT, name, {}) for name in ("a", "b", "c")])
    [found] = await kernel.read([GetMany(AGENT, ("c", "zz", "a", "b"))])
    assert [rec.id for rec in found] == ["c", "a", "b"]


async def test_a_closed_kernel_opens_again_on_its_data(kernel: Kernel) -> None:
    await one(kernel, Put(AGENT, "a", {"v": 1}))
    await kernel.close()
    await kernel.open()
    assert (await kernel.read([Get(AGENT, "a")]))[0].body == {"v": 1}


# -- Page --------------------------------------------------------------------------------------------------------


async def test_a_page_lists_one_parents_records_in_creation_order(kernel: Kernel) -> None:
    await tree(kernel)
    await one(kernel, Put(SESSION, "s3", {}, parent="a1"))
    assert await page_ids(kernel, Page(SESSION, parent="a1")) == ["s1", "s3"]
    assert await page_ids(kernel, Page(SESSION, parent="a1", desc=True)) == ["s3", "s1"]
    assert await page_ids(kernel, Page(SESSION)) == ["s0"]
    assert await page_ids(kernel, Page(SESSION, parent=None)) == ["s1", "s2", "s0", "s3"]
    assert await page_ids(kernel, Page(SESSION, parent="nobody")) == []


async def test_a_page_filters_on_an_index(kernel: Kernel) -> None:
    await kernel.write(
        [
            Put(RESPONSE, "r1", {"turn_id": "t1"}),
            Put(RESPONSE, "r2", {"turn_id": "t2", "previous_response_id": "r1"}),
            Put(RESPONSE, "r3", {"turn_id": "t1", "previous_response_id": "r1"}),
        ]
    )
    assert await page_ids(kernel, Page(RESPONSE, where=("turn_id", "t1"))) == ["r1", "r3"]
    assert await page_ids(kernel, Page(RESPONSE, parent=None, where=("previous_response_id", "r1"))) == ["r2", "r3"]
    assert await page_ids(kernel, Page(RESPONSE, where=("turn_id", "t9"))) == []


async def test_an_index_on_a_boolean_matches_its_text(kernel: Kernel) -> None:
    await tree(kernel)
    assert await page_ids(kernel, Page(STEP, parent=None, where=("pending", "true"))) == ["p1"]
    assert await page_ids(kernel, Page(STEP, parent=None, where=("pending", "false"))) == ["p2"]


async def test_a_page_filters_on_statuses(kernel: Kernel) -> None:
    await tree(kernel)
    await one(kernel, Put(TURN, "t3", {}, parent="s1", status="failed"))
    assert await page_ids(kernel, Page(TURN, parent="s1", statuses=frozenset({"completed", "failed"}))) == ["t1", "t3"]
    assert await page_ids(kernel, Page(TURN, parent="s1", statuses=frozenset({"queued"}))) == []


async def test_since_is_inclusive_and_until_exclusive(kernel: Kernel) -> None:
    await kernel.write([Put(AGENT, f"a{n}", {}, at=100.0 + n) for n in range(5)])
    assert await page_ids(kernel, Page(AGENT, since=101.0, until=103.0)) == ["a1", "a2"]
    assert await page_ids(kernel, Page(AGENT, since=103.0)) == ["a3", "a4"]
    assert await page_ids(kernel, Page(AGENT, until=101.0)) == ["a0"]


async def test_after_continues_from_a_record_in_either_direction(kernel: Kernel) -> None:
    await kernel.write([Put(AGENT, f"a{n}", {}) for n in range(5)])
    assert await page_ids(kernel, Page(AGENT, after="a1", limit=2)) == ["a2", "a3"]
    assert await page_ids(kernel, Page(AGENT, after="a3", desc=True)) == ["a2", "a1", "a0"]
    assert await page_ids(kernel, Page(AGENT, after="a4")) == []


async def test_after_an_unknown_record_is_not_found(kernel: Kernel) -> None:
    await one(kernel, Put(AGENT, "a", {}))
    await one(kernel, Put(CONVERSATION, "c", {}))
    with pytest.raises(NotFoundError):
        await kernel.read([Page(AGENT, after="gone")])
    with pytest.raises(NotFoundError):  # a record of another kind is no cursor
        await kernel.read([Page(AGENT, after="c")])


async def test_offset_skips_records(kernel: Kernel) -> None:
    await kernel.write([Put(AGENT, f"a{n}", {}) for n in range(5)])
    assert await page_ids(kernel, Page(AGENT, offset=3)) == ["a3", "a4"]
    assert await page_ids(kernel, Page(AGENT, offset=1, limit=2, desc=True)) == ["a3", "a2"]
    assert await page_ids(kernel, Page(AGENT, offset=9)) == []


async def test_has_more_is_exact(kernel: Kernel) -> None:
    await kernel.write([Put(AGENT, f"a{n}", {}) for n in range(4)])
    pages = await kernel.read(
        [
            Page(AGENT, limit=3),
            Page(AGENT, limit=4),
            Page(AGENT, limit=5),
            Page(AGENT),
            Page(AGENT, after="a0", limit=3),
            Page(AGENT, after="a0", limit=2),
            Page(AGENT, limit=0),
        ]
    )
    assert [page.has_more for page in pages] == [True, False, False, False, False, True, True]
    assert [len(page.items) for page in pages] == [3, 4, 4, 4, 3, 2, 0]


async def test_a_negative_limit_or_offset_is_refused(kernel: Kernel) -> None:
    await one(kernel, Put(AGENT, "a", {}))
    with pytest.raises(ValueError):
        await kernel.read([Page(AGENT, limit=-1)])
    with pytest.raises(ValueError):
        await kernel.read([Page(AGENT, offset=-1)])


async def test_an_undeclared_index_or_log_is_a_programming_error(kernel: Kernel) -> None:
    await one(kernel, Put(AGENT, "a", {"name": "x"}))
    with pytest.raises(ValueError):
        await kernel.read([Page(AGENT, where=("name", "x"))])
    with pytest.raises(ValueError):
        await one(kernel, Append(AGENT, "a", "events", ("e",)))


async def test_paging_with_after_walks_every_record_once(kernel: Kernel) -> None:
    await kernel.write([Put(AGENT, f"a{n:02}", {}, owner=ALICE if n % 3 else BOB) for n in range(11)])
    allow = Terms(frozenset({"p:key:alice"}))
    for desc in (False, True):
        walked: list[str] = []
        after: str | None = None
        for _ in range(5):  # 8 records, 3 a page: a fourth page would be a cursor going round
            [page] = await kernel.read([Page(AGENT, allow=allow, after=after, limit=3, desc=desc)])
            walked.extend(rec.id for rec in page.items)
            if not page.has_more:
                break
            after = page.items[-1].id
        expected = [f"a{n:02}" for n in range(11) if n % 3]
        assert walked == (expected[::-1] if desc else expected)


# -- Patch -------------------------------------------------------------------------------------------------------


async def test_patch_merges_and_drops_body_fields(kernel: Kernel) -> None:
    seq = await one(kernel, Put(AGENT, "a", {"keep": 1, "change": 1, "gone": 1}, owner=ALICE, at=5.0))
    assert await one(kernel, Patch(AGENT, "a", merge={"change": {"deep": 2}, "new": [3]}, drop=("gone", "absent")))
    [rec] = await kernel.read([Get(AGENT, "a")])
    assert rec == Rec("agent", "a", "", seq, 5.0, ALICE, {"keep": 1, "change": {"deep": 2}, "new": [3]})


async def test_patch_sets_status_and_lease_and_keeps_what_it_leaves_out(kernel: Kernel) -> None:
    await one(kernel, Put(AGENT, "a", {"v": 1}, status="queued", lease_until=10.0))
    await one(kernel, Patch(AGENT, "a", status="running"))
    assert (await kernel.read([Get(AGENT, "a")]))[0].lease_until == 10.0
    await one(kernel, Patch(AGENT, "a", lease_until=None))
    [rec] = await kernel.read([Get(AGENT, "a")])
    assert (rec.status, rec.lease_until, rec.body) == ("running", None, {"v": 1})
    await one(kernel, Patch(AGENT, "a", status=None, lease_until=20.0))
    [rec] = await kernel.read([Get(AGENT, "a")])
    assert (rec.status, rec.lease_until) == (None, 20.0)


async def test_patch_compares_the_status_before_it_sets(kernel: Kernel) -> None:
    await one(kernel, Put(AGENT, "a", {}, status="queued"))
    changed = await kernel.write(
        [
            Patch(AGENT, "a", status="running", expect_status=frozenset({"queued"})),
            Patch(AGENT, "a", status="again", expect_status=frozenset({"queued"}), required=False),
        ]
    )
    assert changed == [True, False]
    with pytest.raises(ConflictError):
        await one(kernel, Patch(AGENT, "a", status="done", expect_status=frozenset({"queued"})))
    assert (await kernel.read([Get(AGENT, "a")]))[0].status == "running"


async def test_patch_of_a_missing_record(kernel: Kernel) -> None:
    assert await one(kernel, Patch(AGENT, "gone", merge={"x": 1}, required=False)) is False
    with pytest.raises(NotFoundError, match="agent 'gone' not found"):
        await one(kernel, Patch(AGENT, "gone", merge={"x": 1}))


# -- exclusive statuses ------------------------------------------------------------------------------------------


async def test_a_parent_holds_one_exclusive_record(kernel: Kernel) -> None:
    await tree(kernel)
    with pytest.raises(ConflictError):
        await one(kernel, Put(TURN, "t3", {}, parent="s1", status="in_progress"))
    await one(kernel, Put(TURN, "t3", {}, parent="s2", status="in_progress"))
    await one(kernel, Put(TURN, "t4", {}, parent="s1", status="queued"))
    with pytest.raises(ConflictError):
        await one(kernel, Patch(TURN, "t4", status="in_progress"))
    assert await page_ids(kernel, Page(TURN, parent="s1")) == ["t1", "t2", "t4"]


async def test_the_slot_is_released_when_the_status_changes(kernel: Kernel) -> None:
    await tree(kernel)
    await kernel.write([Patch(TURN, "t2", status="completed"), Put(TURN, "t3", {}, parent="s1", status="in_progress")])
    await one(kernel, Patch(TURN, "t3", status="failed"))
    await one(kernel, Patch(TURN, "t1", status="in_progress"))
    [page] = await kernel.read([Page(TURN, parent="s1", statuses=frozenset({"in_progress"}))])
    assert [rec.id for rec in page.items] == ["t1"]


async def test_the_holder_may_be_rewritten_keeping_its_slot(kernel: Kernel) -> None:
    await tree(kernel)
    await one(kernel, Put(TURN, "t2", {"v": 2}, parent="s1", status="in_progress", mode="upsert"))
    assert await one(kernel, Patch(TURN, "t2", merge={"v": 3}, status="in_progress"))
    with pytest.raises(ConflictError):
        await one(kernel, Put(TURN, "t1", {}, parent="s1", status="in_progress", mode="upsert"))


async def test_a_deleted_holder_frees_the_slot(kernel: Kernel) -> None:
    await tree(kernel)
    await kernel.write([Delete(TURN, "t2"), Put(TURN, "t3", {}, parent="s1", status="in_progress")])
    assert await page_ids(kernel, Page(TURN, parent="s1")) == ["t1", "t3"]


# -- Delete ------------------------------------------------------------------------------------------------------


async def test_delete_cascades_three_levels_with_logs(kernel: Kernel) -> None:
    await tree(kernel)
    assert await one(kernel, Delete(AGENT, "a1")) is True
    got = await kernel.read(
        [
            Get(AGENT, "a1"),
            Page(SESSION, parent=None),
            Page(TURN, parent=None),
            Page(STEP, parent=None),
            LogCount(TURN, "t1", "events"),
            Events(TURN, "t2", "messages"),
        ]
    )
    assert got[0] is None
    assert [rec.id for rec in got[1].items] == ["s2", "s0"]
    assert got[2].items == [] and got[3].items == []
    assert got[4:] == [0, []]
    assert await page_ids(kernel, Page(AGENT)) == ["a2"]


async def test_delete_of_a_missing_record_is_false(kernel: Kernel) -> None:
    assert await one(kernel, Delete(AGENT, "gone")) is False


async def test_delete_leaves_siblings_parents_and_other_parents_children(kernel: Kernel) -> None:
    await tree(kernel)
    await kernel.write([Put(CONVERSATION, "c", {}), Put(RESPONSE, "r", {})])
    await kernel.write([Put(ITEM, "i1", {}, parent="c"), Put(ITEM, "i2", {}, parent="r")])
    await kernel.write([Delete(TURN, "t1"), Delete(CONVERSATION, "c")])
    assert await page_ids(kernel, Page(TURN, parent="s1")) == ["t2"]
    assert await page_ids(kernel, Page(STEP, parent=None)) == ["p2"]
    assert await page_ids(kernel, Page(ITEM, parent=None)) == ["i2"]
    assert (await kernel.read([LogCount(TURN, "t2", "messages")]))[0] == 1


async def test_a_recreated_id_is_a_new_record(kernel: Kernel) -> None:
    await tree(kernel)
    [rec] = await kernel.read([Get(TURN, "t1")])
    await kernel.write([Delete(TURN, "t1"), Put(TURN, "t1", {"again": True}, parent="s1")])
    got = await kernel.read([Get(TURN, "t1"), LogCount(TURN, "t1", "events"), Page(STEP, parent="t1")])
    assert got[0].seq > rec.seq and got[0].body == {"again": True}
    assert got[1] == 0 and got[2].items == []


async def test_delete_removes_the_owner_terms_of_the_records_it_cascades_to(kernel: Kernel) -> None:
    await kernel.write([Put(AGENT, "a", {}, owner=ALICE), Put(SESSION, "s", {}, parent="a", owner=ALICE)])
    await kernel.write(
        [Delete(AGENT, "a"), Put(AGENT, "a", {}, owner=BOB), Put(SESSION, "s", {}, parent="a", owner=BOB)]
    )
    alice = Terms(frozenset({"p:key:alice", "teams:red"}))
    assert await page_ids(kernel, Page(AGENT, allow=alice)) == []
    assert await page_ids(kernel, Page(SESSION, parent=None, allow=alice)) == []
    assert await kernel.read([Get(AGENT, "a", allow=alice), Get(SESSION, "s", allow=alice)]) == [None, None]
    assert await page_ids(kernel, Page(AGENT, allow=Terms(frozenset({"teams:green"})))) == ["a"]
    assert await page_ids(kernel, Page(SESSION, parent="a", allow=Terms(frozenset({"p:sub:bob"})))) == ["s"]


async def test_a_kind_outside_the_schema_is_a_programming_error(kernel: Kernel) -> None:
    stranger = Kind("stranger")
    with pytest.raises(ValueError, match="stranger"):
        await kernel.write([Put(stranger, "x", {})])
    with pytest.raises(ValueError, match="stranger"):
        await kernel.read([Get(stranger, "x")])
