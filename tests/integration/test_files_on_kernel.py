"""Files as kernel records, through :class:`FileService` on SQLite, PostgreSQL and Redis.

Each file is stored with its owner in one write; a caller reads, lists and deletes only what the access policy
lets it, a page is filtered in the kernel's query (one read, however many files others own), and a deleted file
leaves every vector store, with its chunks there.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from storage_backends import BACKENDS

from ferryman.auth.policy import ACTIONS, AccessPolicy, parse_policy
from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.errors import ForbiddenError, NotFoundError
from ferryman.knowledge.blobs import MemoryBlobStore
from ferryman.services import files as files_module
from ferryman.services.access import Access
from ferryman.services.file_expiry import HOLD_SECONDS, FileExpiry
from ferryman.services.files import FileService
from ferryman.storage.base import Store
from ferryman.storage.kernel.counting import CountingKernel
from ferryman.storage.knowledge import ChunkRecord, VectorStoreFileRecord, VectorStoreRecord

pytestmark = pytest.mark.anyio

ALICE = Principal(PrincipalKind.SUBJECT, "alice", {"teams": ("red",)})
BOB = Principal(PrincipalKind.API_KEY, "bob", {"teams": ("red",)})
CAROL = Principal(PrincipalKind.SUBJECT, "carol", {"teams": ("blue",)})
TEAM_READS = parse_policy(
    [
        {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
        {"permit": {"actions": ["read"]}, "when": "user in owners teams"},
    ]
)
NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield opened


def service(store: Store, policy: AccessPolicy | None = None) -> tuple[FileService, CountingKernel]:
    kernel = CountingKernel(store.kernel)
    return FileService(kernel, Access(policy or AccessPolicy()), store, MemoryBlobStore()), kernel


async def upload(files: FileService, who: Principal | None, name: str, purpose: str = "assistants") -> str:
    with acting_as(who):
        return (await files.upload(name, b"ferry notes", purpose)).id


async def expiring(files: FileService, name: str) -> tuple[str, int]:
    """A file of Alice's that expires in an hour: its id and its expiry."""
    with acting_as(ALICE):
        file = await files.upload(name, b"ferry notes", "assistants", expires_after_seconds=3600)
    assert file.expires_at is not None
    return file.id, file.expires_at


async def test_a_file_is_stored_read_listed_by_purpose_and_deleted_with_its_bytes(store: Store) -> None:
    files, _ = service(store)
    first = await upload(files, None, "a.txt")
    with acting_as(None):
        second = (await files.upload("b.pdf", b"%PDF", "batch", expires_after_seconds=3600)).id
        got = await files.get(second)
        assert (got.filename, got.purpose, got.bytes, got.expires_at) == ("b.pdf", "batch", 4, got.created_at + 3600)
        assert await files.content(first) == (b"ferry notes", "text/plain")
        assert [f.id for f in (await files.list("assistants", None, 10, "asc")).data] == [first]
        await files.delete(first)
        for gone in (files.get(first), files.delete(first), files.content(first)):
            with pytest.raises(NotFoundError):
                await gone
        assert [f.id for f in (await files.list(None, None, 10, "asc")).data] == [second]
    with pytest.raises(NotFoundError):
        await files.blobs.get(first)


async def test_files_page_by_creation_both_ways_with_honest_has_more(store: Store) -> None:
    files, _ = service(store)
    ids = [await upload(files, None, f"f{i}.txt") for i in range(5)]
    with acting_as(None):
        for order, expected in (("asc", ids), ("desc", ids[::-1])):
            seen: list[str] = []
            after = None
            while True:
                page = await files.list(None, after, 2, order)
                seen += [f.id for f in page.data]
                if not page.has_more:
                    break
                after = page.last_id
            assert seen == expected, order
        last = await files.list(None, ids[3], 1, "asc")
        assert ([f.id for f in last.data], last.has_more) == ([ids[4]], False)
        with pytest.raises(NotFoundError):
            await files.list(None, "file-unknown", 1, "asc")


async def test_a_callers_page_is_one_filtered_read_among_many_files_of_others(store: Store) -> None:
    files, kernel = service(store)
    theirs = [await upload(files, BOB, f"bob{i}.txt") for i in range(120)]
    mine = [await upload(files, ALICE, f"alice{i}.txt", "batch" if i % 2 else "assistants") for i in range(3)]
    kernel.reset()
    with acting_as(ALICE):
        page = await files.list(None, None, 2, "desc")
        assert ([f.id for f in page.data], page.has_more) == ([mine[2], mine[1]], True)
        assert kernel.round_trips == 1
        rest = await files.list("assistants", page.last_id, 10, "desc")
        assert [f.id for f in rest.data] == [mine[0]]
        assert kernel.round_trips == 2  # the cursor is read in the page's own trip
        for unreadable in (files.get(theirs[0]), files.list(None, theirs[0], 2, "asc"), files.delete(theirs[0])):
            with pytest.raises(NotFoundError):  # another's file looks missing, even as a cursor
                await unreadable
    with acting_as(BOB):
        assert len((await files.list(None, None, 200, "asc")).data) == len(theirs)


async def test_the_policys_team_grant_is_answered_from_the_owner_stored_with_the_file(store: Store) -> None:
    files, _ = service(store, TEAM_READS)
    alices = await upload(files, ALICE, "plan.txt")
    with acting_as(BOB):  # same team: reads, may not delete
        assert [f.id for f in (await files.list(None, None, 10, "asc")).data] == [alices]
        assert (await files.get(alices)).filename == "plan.txt"
        assert await files.readable_names([alices]) == {alices: "plan.txt"}
        with pytest.raises(ForbiddenError):
            await files.delete(alices)
    with acting_as(CAROL):
        assert (await files.list(None, None, 10, "asc")).data == []
        assert await files.readable_names([alices]) == {}
        with pytest.raises(NotFoundError):
            await files.get(alices)
    with acting_as(ALICE):
        await files.delete(alices)


async def test_deleting_a_file_detaches_it_from_every_vector_store_with_its_chunks(store: Store) -> None:
    files, _ = service(store)
    kept, doomed = await upload(files, None, "kept.txt"), await upload(files, None, "doomed.txt")
    at = int(NOW.timestamp())
    for vs in ("vs_1", "vs_2"):
        await store.create_vector_store(VectorStoreRecord(vs, vs, at, "m", 3), [])
        await store.add_vector_store_files(vs, [VectorStoreFileRecord(vs, f, at) for f in (kept, doomed)])
    for job in await store.claim_ingestion(NOW, NOW + timedelta(minutes=1), 100):
        chunk = ChunkRecord(f"c_{job.vector_store_id}_{job.file_id}", job.vector_store_id, job.file_id, 0,
                            "ferry notes", bytes(12), 2)  # fmt: skip
        assert await store.finish_ingestion(replace(job, status="completed"), [chunk], NOW + timedelta(minutes=1))
    with acting_as(None):
        await files.delete(doomed)
    for vs in ("vs_1", "vs_2"):
        assert [f.file_id for f in await store.all_vector_store_files(vs)] == [kept]
        assert [h.chunk.file_id for h in await store.keyword_search(vs, "ferry", None, 10)] == [kept]
    await store.forget_file(doomed)  # nothing left to detach: nothing happens
    await store.forget_file("file-never-attached")


async def test_an_expired_file_is_missing_at_once_and_deleted_by_one_sweep(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    files, _ = service(store)
    doomed, expires_at = await expiring(files, "old.txt")
    kept = await upload(files, ALICE, "new.txt")
    at = int(NOW.timestamp())
    await store.create_vector_store(VectorStoreRecord("vs_1", "vs_1", at, "m", 3), [])
    await store.add_vector_store_files("vs_1", [VectorStoreFileRecord("vs_1", f, at) for f in (doomed, kept)])
    sweep, other_replica = FileExpiry(files), FileExpiry(service(store)[0])
    assert await sweep.once(expires_at - 1) == 0
    with acting_as(ALICE):
        assert await files.get(doomed)
    monkeypatch.setattr(files_module, "now", lambda: expires_at)  # the hour is over; no sweep has run yet
    with acting_as(ALICE):
        with pytest.raises(NotFoundError):
            await files.get(doomed)
        assert [f.id for f in (await files.list(None, None, 10, "asc")).data] == [kept]
        assert await files.readable_names([doomed]) == {}
    assert await sweep.once(expires_at + 1) == 1
    assert await other_replica.once(expires_at + 1) == 0  # claimed once, across replicas
    assert await files.records.find(doomed) is None
    assert [f.file_id for f in await store.all_vector_store_files("vs_1")] == [kept]
    with pytest.raises(NotFoundError):
        await files.blobs.get(doomed)


async def test_pages_skip_expired_files_the_sweep_has_not_deleted_yet_and_say_honestly_what_follows(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    files, kernel = service(store)
    (first, _), (second, _) = await expiring(files, "a.txt"), await expiring(files, "b.txt")
    kept = await upload(files, ALICE, "c.txt")
    last, expires_at = await expiring(files, "d.txt")  # the last to expire (a second may pass meanwhile)
    monkeypatch.setattr(files_module, "now", lambda: expires_at)
    kernel.reset()
    with acting_as(ALICE):
        # A whole page expired: the next one is read, rather than an empty page that ends a client's paging.
        page = await files.list(None, None, 2, "asc")
        assert ([f.id for f in page.data], page.last_id, page.has_more) == ([kept], kept, False)
        assert kernel.round_trips == 2
        for gone in (first, second, last):
            with pytest.raises(NotFoundError):  # not as a cursor either
                await files.list(None, gone, 2, "asc")


async def test_a_cursor_the_caller_may_not_read_is_audited_as_a_denied_read(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    files, _ = service(store)
    bobs = await upload(files, BOB, "b.txt")
    caplog.set_level(logging.INFO, logger="ferryman.audit")
    with acting_as(ALICE):
        # Another's file and no file at all look alike, to the caller and in the audit trail.
        for unreadable in (bobs, "file-none"):
            for call in (files.get(unreadable), files.list(None, unreadable, 2, "asc")):
                caplog.clear()
                with pytest.raises(NotFoundError):
                    await call
                audited = [(r.event, r.action, r.resource) for r in caplog.records if r.name == "ferryman.audit"]
                assert audited == [("denied", "read", f"file::{unreadable}")]


async def test_an_expired_file_whose_delete_failed_is_claimed_again_once_its_hold_ends(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    files, _ = service(store)
    doomed, expires_at = await expiring(files, "a.txt")
    forget, failures = store.forget_file, [RuntimeError("the database went away")]

    async def failing_once(file_id: str) -> None:
        if failures:
            raise failures.pop()
        await forget(file_id)

    monkeypatch.setattr(store, "forget_file", failing_once)
    sweep = FileExpiry(files)
    assert await sweep.once(expires_at + 1) == 0
    assert await sweep.once(expires_at + 2) == 0  # held by the claim that failed
    assert await sweep.once(expires_at + 2 + HOLD_SECONDS) == 1
    assert await files.records.find(doomed) is None
