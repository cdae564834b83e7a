"""The storage contract of knowledge (files, vector stores, ingestion jobs, chunks), on every backend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from storage_backends import BACKENDS, POSTGRES_URL, REDIS_URL

from ferryman.errors import ConflictError, NotFoundError
from ferryman.storage.base import Store
from ferryman.storage.domain.file_batches import file_batch
from ferryman.storage.domain.vector_stores import touched, vector_stores
from ferryman.storage.kernel.model import Owner
from ferryman.storage.knowledge import (
    ChunkRecord,
    FileBatchRecord,
    FileCounts,
    LastError,
    StoreFiles,
    VectorStoreFileRecord,
    VectorStoreRecord,
)

pytestmark = pytest.mark.anyio

NOW = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield opened


def twin(store: Store) -> Store:
    """A second store object on the same database (another replica's)."""
    from ferryman.storage.sql.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        return SqliteStore(store._db.path)  # type: ignore[attr-defined]
    name = type(store).__name__
    if name == "PostgresStore":
        from ferryman.storage.sql.postgres import PostgresStore

        return PostgresStore(POSTGRES_URL, schema=store._db._schema)  # type: ignore[attr-defined]
    from ferryman.storage.redis.store import RedisStore

    return RedisStore(REDIS_URL, prefix=store._keys.prefix)  # type: ignore[attr-defined]


def vec(*values: float) -> bytes:
    array = np.asarray(values, dtype=np.float32)
    return (array / np.linalg.norm(array)).astype("<f4").tobytes()


def unit(*values: float) -> list[float]:
    return [float(x) for x in np.frombuffer(vec(*values), dtype="<f4")]


def a_store(vector_store_id: str = "vs_1", created_at: int = 100, **fields: Any) -> VectorStoreRecord:
    return VectorStoreRecord(
        vector_store_id=vector_store_id,
        name=fields.pop("name", "docs"),
        created_at=created_at,
        embedding_model="all-MiniLM-L6-v2",
        embedding_dimension=3,
        chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}},
        last_active_at=created_at,
        **fields,
    )


def attached(
    file_id: str, vector_store_id: str = "vs_1", created_at: int = 100, **fields: Any
) -> VectorStoreFileRecord:
    return VectorStoreFileRecord(vector_store_id=vector_store_id, file_id=file_id, created_at=created_at, **fields)


def chunk(chunk_id: str, text: str, embedding: bytes, file_id: str = "file_a", position: int = 0) -> ChunkRecord:
    return ChunkRecord(
        chunk_id=chunk_id,
        vector_store_id="vs_1",
        file_id=file_id,
        position=position,
        text=text,
        embedding=embedding,
        token_count=len(text.split()),
        metadata={"document_id": file_id, "n": position},
    )


async def claim_all(store: Store, now: datetime = NOW) -> list[VectorStoreFileRecord]:
    return await store.claim_ingestion(now, now + LEASE, 100)


# Vector stores and their files


async def test_a_vector_store_keeps_its_settings_and_first_files(store: Store) -> None:
    record = a_store(metadata={"team": "ml"}, expires_after={"anchor": "last_active_at", "days": 7})
    owner = Owner("subject", "alice", {"teams": ("ml",)})
    await store.create_vector_store(record, [attached("file_a", attributes={"lang": "en", "year": 2024.0})], owner)
    found_store = await vector_stores(store.kernel).find("vs_1")
    assert found_store is not None and (found_store.value, found_store.rec.owner) == (record, owner)
    found = await store.get_vector_store_file("vs_1", "file_a")
    assert (found.status, found.attributes, found.last_error) == ("in_progress", {"lang": "en", "year": 2024.0}, None)
    assert await store.file_counts("vs_1") == FileCounts(in_progress=1)
    with pytest.raises(ConflictError):
        await store.create_vector_store(a_store(name="other"), [attached("file_b")])
    # the refused create wrote nothing on either side: not its record, not its file
    assert (await vector_stores(store.kernel).get("vs_1")).name == "docs"
    assert [f.file_id for f in await store.all_vector_store_files("vs_1")] == ["file_a"]


async def test_a_deleted_vector_store_leaves_neither_record_nor_index(store: Store) -> None:
    await store.create_vector_store(a_store(), [attached("file_a")])
    await store.add_chunks("vs_1", [chunk("c1", "alpha beta", vec(1, 0, 0))])
    await store.delete_vector_store("vs_1")
    assert await vector_stores(store.kernel).find("vs_1") is None
    assert await store.all_vector_store_files("vs_1") == []
    assert await store.keyword_search("vs_1", "alpha", None, 5) == []
    with pytest.raises(NotFoundError):
        await store.delete_vector_store("vs_1")
    # made again under its id, it starts empty
    await store.create_vector_store(a_store(name="again"), [])
    assert (await vector_stores(store.kernel).get("vs_1")).name == "again"
    assert await store.file_counts("vs_1") == FileCounts()


async def test_attachments_list_by_status_and_batch_and_count(store: Store) -> None:
    await store.create_vector_store(a_store(), [attached("file_a", created_at=100)])
    batch = FileBatchRecord("batch_1", "vs_1", 101)
    files = [attached(f, created_at=101 + i, batch_id="batch_1") for i, f in enumerate(["file_b", "file_c"])]
    await store.add_vector_store_files("vs_1", files, batch=batch)
    assert await file_batch(store.kernel, "vs_1", "batch_1") == batch
    every = await store.list_vector_store_files("vs_1", None, 10, "asc")
    assert [f.file_id for f in every.items] == ["file_a", "file_b", "file_c"]
    desc = await store.list_vector_store_files("vs_1", "file_c", 1, "desc")
    assert ([f.file_id for f in desc.items], desc.has_more) == (["file_b"], True)
    batched = await store.list_vector_store_files("vs_1", None, 10, "asc", batch_id="batch_1")
    assert [f.file_id for f in batched.items] == ["file_b", "file_c"]
    assert await store.file_counts("vs_1", "batch_1") == FileCounts(in_progress=2)
    await store.update_vector_store_file("vs_1", "file_b", {"kind": "faq", "public": True})
    assert (await store.get_vector_store_file("vs_1", "file_b")).attributes == {"kind": "faq", "public": True}
    assert [f.file_id for f in await store.all_vector_store_files("vs_1")] == ["file_a", "file_b", "file_c"]
    await store.cancel_file_batch("vs_1", "batch_1")
    assert (await file_batch(store.kernel, "vs_1", "batch_1")).cancelled
    cancelled = await store.list_vector_store_files("vs_1", None, 10, "asc", status="cancelled")
    assert [f.file_id for f in cancelled.items] == ["file_b", "file_c"]
    assert await store.file_counts("vs_1") == FileCounts(in_progress=1, cancelled=2)
    with pytest.raises(NotFoundError):
        await file_batch(store.kernel, "vs_1", "batch_none")
    with pytest.raises(NotFoundError):
        await store.update_vector_store_file("vs_1", "file_none", {})


async def test_a_batch_is_written_with_its_files_or_not_at_all(store: Store) -> None:
    await store.create_vector_store(a_store(), [])
    await store.create_vector_store(a_store(vector_store_id="vs_2"), [])
    batch = FileBatchRecord("batch_1", "vs_1", 101)
    with pytest.raises(NotFoundError):  # no such store: neither the record nor a file is written
        lost = FileBatchRecord("batch_1", "vs_none", 101)
        await store.add_vector_store_files("vs_none", [attached("file_a", batch_id="batch_1")], batch=lost)
    await store.add_vector_store_files("vs_1", [attached("file_a", batch_id="batch_1")], batch=batch)
    with pytest.raises(ConflictError):  # a taken id refuses the write whole: file_b is not attached
        await store.add_vector_store_files("vs_1", [attached("file_b", batch_id="batch_1")], batch=batch)
    assert [f.file_id for f in await store.all_vector_store_files("vs_1")] == ["file_a"]
    with pytest.raises(NotFoundError):  # another store's batch is not found, nor cancelled
        await file_batch(store.kernel, "vs_2", "batch_1")
    with pytest.raises(NotFoundError):
        await store.cancel_file_batch("vs_2", "batch_1")
    with pytest.raises(NotFoundError):
        await store.cancel_file_batch("vs_1", "batch_none")
    assert await store.file_counts("vs_1", "batch_1") == FileCounts(in_progress=1)
    assert not (await file_batch(store.kernel, "vs_1", "batch_1")).cancelled


# Ingestion jobs


async def test_a_claimed_job_is_finished_with_its_chunks_once(store: Store) -> None:
    await store.create_vector_store(a_store(), [attached("file_a")])
    (job,) = await claim_all(store)
    assert (job.file_id, job.status) == ("file_a", "in_progress")
    assert await claim_all(store) == []
    done = replace(job, status="completed", usage_bytes=42)
    chunks = [chunk("c0", "alpha beta", vec(1, 0, 0)), chunk("c1", "gamma delta", vec(0, 1, 0), position=1)]
    assert await store.finish_ingestion(done, chunks, NOW + LEASE)
    assert not await store.finish_ingestion(done, chunks, NOW + LEASE)
    found = await store.get_vector_store_file("vs_1", "file_a")
    assert (found.status, found.usage_bytes) == ("completed", 42)
    listed = await store.list_chunks("vs_1", "file_a", None, 10)
    assert ([c.chunk_id for c in listed.items], listed.has_more) == (["c0", "c1"], False)
    assert listed.items[0] == chunks[0]
    assert await claim_all(store, NOW + 2 * LEASE) == []


async def test_store_files_counts_each_stores_files_and_the_bytes_they_hold_in_one_read(store: Store) -> None:
    await store.create_vector_store(a_store(), [attached("file_a"), attached("file_b", created_at=101)])
    await store.create_vector_store(a_store("vs_2"), [attached("file_c", "vs_2")])
    await store.create_vector_store(a_store("vs_empty"), [])
    jobs = {job.file_id: job for job in await claim_all(store)}
    assert await store.finish_ingestion(replace(jobs["file_a"], status="completed", usage_bytes=42), [], NOW + LEASE)
    failed = replace(jobs["file_b"], status="failed", usage_bytes=0, last_error=LastError("unsupported_file", "no"))
    assert await store.finish_ingestion(failed, [], NOW + LEASE)
    assert await store.finish_ingestion(replace(jobs["file_c"], status="completed", usage_bytes=7), [], NOW + LEASE)

    totals = await store.store_files(["vs_1", "vs_2", "vs_empty", "vs_none"])

    assert totals == {
        "vs_1": StoreFiles(FileCounts(completed=1, failed=1), 42),
        "vs_2": StoreFiles(FileCounts(completed=1), 7),
        "vs_empty": StoreFiles(),
        "vs_none": StoreFiles(),
    }
    await store.delete_vector_store_file("vs_1", "file_a")
    assert (await store.store_files(["vs_1"]))["vs_1"] == StoreFiles(FileCounts(failed=1), 0)
    assert await store.store_files([]) == {}


async def test_a_redis_store_made_before_its_bytes_were_kept_is_summed_once_then_kept(tmp_path: Path) -> None:
    async with BACKENDS["redis"](tmp_path) as store:  # SQL sums the bytes in the count's own statement
        await _summed_once_then_kept(store)


async def _summed_once_then_kept(store: Store) -> None:
    await store.create_vector_store(a_store(), [attached("file_a"), attached("file_b", created_at=101)])
    vector_store = store._keys.of("vector_store", "vs_1")  # type: ignore[attr-defined]
    await store._db.hdel(vector_store, "files_bytes")  # type: ignore[attr-defined]  # as an older version wrote it
    jobs = {job.file_id: job for job in await claim_all(store)}
    assert await store.finish_ingestion(replace(jobs["file_a"], status="completed", usage_bytes=42), [], NOW + LEASE)
    assert (await store.store_files(["vs_1"]))["vs_1"].usage_bytes == 42
    assert await store.finish_ingestion(replace(jobs["file_b"], status="completed", usage_bytes=8), [], NOW + LEASE)
    await store.add_vector_store_files("vs_1", [attached("file_c", created_at=102, usage_bytes=5)])
    assert (await store.store_files(["vs_1"]))["vs_1"].usage_bytes == 55
    await store.forget_file("file_a")
    assert (await store.store_files(["vs_1"]))["vs_1"].usage_bytes == 13


async def test_vector_store_files_reads_those_of_the_files_attached_to_the_store(store: Store) -> None:
    await store.create_vector_store(a_store(), [attached("file_a", attributes={"lang": "en"}), attached("file_b")])
    await store.create_vector_store(a_store("vs_2"), [attached("file_c", "vs_2")])
    found = await store.vector_store_files("vs_1", ["file_b", "file_a", "file_c", "file_none", "file_a"])
    assert sorted((f.file_id, f.attributes) for f in found) == [("file_a", {"lang": "en"}), ("file_b", {})]
    assert await store.vector_store_files("vs_1", []) == []


async def test_a_failed_job_keeps_its_error(store: Store) -> None:
    await store.create_vector_store(a_store(), [attached("file_a")])
    (job,) = await claim_all(store)
    failed = replace(job, status="failed", last_error=LastError("unsupported_file", 'no "text" in it'))
    assert await store.finish_ingestion(failed, [], NOW + LEASE)
    assert (await store.get_vector_store_file("vs_1", "file_a")).last_error == failed.last_error
    assert await store.file_counts("vs_1") == FileCounts(failed=1)


async def test_two_claimers_get_disjoint_jobs(store: Store) -> None:
    files = [attached(f"file_{i}", created_at=100 + i) for i in range(6)]
    await store.create_vector_store(a_store(), files)
    other = twin(store)
    await other.open()
    try:
        first, second = await asyncio.gather(
            store.claim_ingestion(NOW, NOW + LEASE, 4), other.claim_ingestion(NOW, NOW + LEASE, 4)
        )
    finally:
        await other.close()
    ids = [j.file_id for j in first] + [j.file_id for j in second]
    assert sorted(ids) == [f.file_id for f in files]


async def test_a_lapsed_claim_is_taken_over_and_the_first_claimer_writes_nothing(store: Store) -> None:
    await store.create_vector_store(a_store(), [attached("file_a")])
    (job,) = await claim_all(store)
    assert await store.renew_ingestion([("vs_1", "file_a", NOW + LEASE)], NOW + 2 * LEASE) == [("vs_1", "file_a")]
    assert await claim_all(store, NOW + LEASE + timedelta(seconds=1)) == []
    later = NOW + 3 * LEASE
    (again,) = await claim_all(store, later)
    stale = replace(job, status="completed")
    assert not await store.finish_ingestion(stale, [chunk("c0", "stale", vec(1, 0, 0))], NOW + LEASE)
    assert not await store.finish_ingestion(stale, [chunk("c0", "stale", vec(1, 0, 0))], NOW + 2 * LEASE)
    assert (await store.list_chunks("vs_1", "file_a", None, 10)).items == []
    assert await store.finish_ingestion(replace(again, status="completed"), [], later + LEASE)


async def test_the_ingestion_backlog_counts_the_files_waiting_or_claimed_in_every_store(store: Store) -> None:
    assert await store.ingestion_backlog() == 0
    await store.create_vector_store(a_store(), [attached("file_a"), attached("file_b", created_at=101)])
    await store.create_vector_store(a_store("vs_2"), [attached("file_c", "vs_2")])
    assert await store.ingestion_backlog() == 3
    first, *_ = await store.claim_ingestion(NOW, NOW + LEASE, 1)
    assert await store.ingestion_backlog() == 3  # claimed, still in progress
    assert await store.finish_ingestion(replace(first, status="completed"), [], NOW + LEASE)
    await store.delete_vector_store_file("vs_2", "file_c")
    assert await store.ingestion_backlog() == 1


async def test_only_the_claim_a_job_is_held_under_is_renewed(store: Store) -> None:
    files = [attached(f"file_{c}", created_at=100 + i) for i, c in enumerate("abcd")]
    await store.create_vector_store(a_store(), files[:3])
    await store.add_vector_store_files(
        "vs_1", [attached("file_d", batch_id="batch_1")], batch=FileBatchRecord("batch_1", "vs_1", 101)
    )
    await claim_all(store)
    later = NOW + 3 * LEASE
    (taken,) = await store.claim_ingestion(later, later + LEASE, 1)  # file_a: lapsed and claimed again
    await store.delete_vector_store_file("vs_1", "file_b")
    await store.cancel_file_batch("vs_1", "batch_1")
    held = [("vs_1", f"file_{c}", NOW + LEASE) for c in "abcd"] + [("vs_1", "file_x", NOW + LEASE)]
    assert await store.renew_ingestion(held, later) == [("vs_1", "file_c")]
    assert await store.renew_ingestion([("vs_1", "file_a", later + LEASE)], later + 2 * LEASE) == [
        ("vs_1", taken.file_id)
    ]
    assert await store.renew_ingestion([], later) == []
    # the renewed claims hold under their new leases only
    assert not await store.finish_ingestion(replace(taken, status="completed"), [], later + LEASE)
    assert await store.finish_ingestion(replace(taken, status="completed"), [], later + 2 * LEASE)
    assert await store.finish_ingestion(replace(files[2], status="completed"), [], later)


async def test_touching_a_vector_store_sets_its_last_activity_alone(store: Store) -> None:
    created = a_store(metadata={"k": "v"})
    await store.create_vector_store(created, [])
    records = vector_stores(store.kernel)
    await store.kernel.write([touched("vs_1", 5000)])
    assert await records.get("vs_1") == replace(created, last_active_at=5000)
    await store.kernel.write([touched("vs_404", 5000)])  # gone: nothing to keep alive, no error
    assert await records.find("vs_404") is None


async def test_a_cancelled_or_detached_job_writes_nothing(store: Store) -> None:
    await store.create_vector_store(a_store(), [attached("file_a")])
    await store.add_vector_store_files(
        "vs_1", [attached("file_b", batch_id="batch_1")], batch=FileBatchRecord("batch_1", "vs_1", 101)
    )
    jobs = {job.file_id: job for job in await claim_all(store)}
    await store.cancel_file_batch("vs_1", "batch_1")
    await store.delete_vector_store_file("vs_1", "file_a")
    for job in jobs.values():
        assert not await store.finish_ingestion(
            replace(job, status="completed"), [chunk("c", "text", vec(1, 0, 0), job.file_id)], NOW + LEASE
        )
    assert (await store.get_vector_store_file("vs_1", "file_b")).status == "cancelled"
    assert await store.keyword_search("vs_1", "text", None, 10) == []
    with pytest.raises(NotFoundError):
        await store.get_vector_store_file("vs_1", "file_a")
    with pytest.raises(NotFoundError):
        await store.delete_vector_store_file("vs_1", "file_a")


async def test_attaching_a_file_again_drops_its_chunks_and_starts_over(store: Store) -> None:
    await store.create_vector_store(a_store(), [attached("file_a")])
    (job,) = await claim_all(store)
    await store.finish_ingestion(replace(job, status="completed"), [chunk("c0", "old", vec(1, 0, 0))], NOW + LEASE)
    await store.add_vector_store_files("vs_1", [attached("file_a", created_at=200)])
    assert (await store.get_vector_store_file("vs_1", "file_a")).status == "in_progress"
    assert (await store.list_chunks("vs_1", "file_a", None, 10)).items == []
    assert [j.file_id for j in await claim_all(store)] == ["file_a"]


# Chunks and search


async def indexed(store: Store) -> None:
    await store.create_vector_store(a_store(), [])
    await store.add_chunks(
        "vs_1",
        [
            chunk("c0", "The ferry crosses the river at dawn", vec(1, 0, 0), "file_a", 0),
            chunk("c1", "Tickets for the ferry are sold at the harbour office", vec(0.9, 0.1, 0), "file_a", 1),
            chunk("c2", "Mountain trails close in winter", vec(0, 1, 0), "file_b", 0),
            chunk("c3", "Winter ferry timetable and ticket prices", vec(0, 0, 1), "file_b", 1),
        ],
    )


async def test_chunks_are_replaced_by_id_and_listed_in_order(store: Store) -> None:
    await indexed(store)
    await store.add_chunks("vs_1", [chunk("c1", "Replaced text", vec(0, 1, 0), "file_a", 1)])
    first = await store.list_chunks("vs_1", "file_a", None, 1)
    assert ([c.chunk_id for c in first.items], first.has_more) == (["c0"], True)
    rest = await store.list_chunks("vs_1", "file_a", 0, 5)
    assert ([c.text for c in rest.items], rest.has_more) == (["Replaced text"], False)
    assert [h.chunk.chunk_id for h in await store.keyword_search("vs_1", "harbour", None, 5)] == []
    with pytest.raises(NotFoundError):
        await store.add_chunks("vs_none", [chunk("c9", "x", vec(1, 0, 0))])


async def test_keyword_search_ranks_shared_words_and_filters_files(store: Store) -> None:
    await indexed(store)
    hits = await store.keyword_search("vs_1", "When does the winter ferry leave, and what do tickets cost?", None, 10)
    ids = [h.chunk.chunk_id for h in hits]
    assert ids[0] == "c3" and set(ids) == {"c0", "c1", "c2", "c3"}
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))
    filtered = await store.keyword_search("vs_1", "ferry", ["file_b"], 10)
    assert [h.chunk.chunk_id for h in filtered] == ["c3"]
    assert await store.keyword_search("vs_1", "ferry", [], 10) == []
    assert len(await store.keyword_search("vs_1", "ferry", None, 1)) == 1
    assert await store.keyword_search("vs_2", "ferry", None, 10) == []


async def test_keyword_search_takes_any_text_and_an_empty_query_finds_nothing(store: Store) -> None:
    await indexed(store)
    assert await store.keyword_search("vs_1", "", None, 10) == []
    assert await store.keyword_search("vs_1", " ?!* ", None, 10) == []
    hits = await store.keyword_search("vs_1", "ferry\" AND (NEAR OR -river* ^:'", None, 10)
    assert {"c0", "c1", "c3"} <= {h.chunk.chunk_id for h in hits}


async def test_vector_search_orders_by_cosine_and_filters_files(store: Store) -> None:
    await indexed(store)
    hits = await store.vector_search("vs_1", unit(1, 0.05, 0), None, 3)
    assert [h.chunk.chunk_id for h in hits] == ["c0", "c1", "c2"]
    assert hits[0].score == pytest.approx(float(np.dot(unit(1, 0.05, 0), unit(1, 0, 0))), abs=1e-5)
    assert hits[0].chunk == chunk("c0", "The ferry crosses the river at dawn", vec(1, 0, 0), "file_a", 0)
    filtered = await store.vector_search("vs_1", unit(1, 0, 0), ["file_b"], 5)
    assert [h.chunk.chunk_id for h in filtered] == ["c2", "c3"] or [h.chunk.chunk_id for h in filtered] == ["c3", "c2"]
    assert await store.vector_search("vs_none", unit(1, 0, 0), None, 5) == []


async def test_another_replica_sees_chunk_writes_at_its_next_vector_search(store: Store) -> None:
    await indexed(store)
    other = twin(store)
    await other.open()
    try:
        assert [h.chunk.chunk_id for h in await other.vector_search("vs_1", unit(1, 1, 1), None, 10)] != []
        await store.add_chunks("vs_1", [chunk("c4", "new", vec(1, 1, 1), "file_c", 0)])
        assert (await other.vector_search("vs_1", unit(1, 1, 1), None, 1))[0].chunk.chunk_id == "c4"
        await store.add_vector_store_files("vs_1", [attached("file_c")])
        await store.delete_vector_store_file("vs_1", "file_c")
        assert "c4" not in [h.chunk.chunk_id for h in await other.vector_search("vs_1", unit(1, 1, 1), None, 10)]
        await store.delete_vector_store("vs_1")
        await store.create_vector_store(a_store(), [])
        assert await other.vector_search("vs_1", unit(1, 1, 1), None, 10) == []
    finally:
        await other.close()


# Cascades


async def test_deleting_a_vector_store_takes_its_files_batches_and_chunks(store: Store) -> None:
    await indexed(store)
    await store.add_vector_store_files("vs_1", [attached("file_a")])
    await store.add_vector_store_files(
        "vs_1", [attached("file_b", batch_id="batch_1")], batch=FileBatchRecord("batch_1", "vs_1", 101)
    )
    await store.delete_vector_store("vs_1")
    await store.create_vector_store(a_store(), [])
    assert await store.all_vector_store_files("vs_1") == []
    assert await store.keyword_search("vs_1", "ferry", None, 10) == []
    assert await store.vector_search("vs_1", unit(1, 0, 0), None, 10) == []
    assert (await store.list_chunks("vs_1", "file_a", None, 10)).items == []
    with pytest.raises(NotFoundError):
        await file_batch(store.kernel, "vs_1", "batch_1")
    assert await claim_all(store) == []


async def test_forgetting_a_file_detaches_it_everywhere(store: Store) -> None:
    await store.create_vector_store(a_store(), [attached("file_a")])
    await store.create_vector_store(a_store("vs_2"), [attached("file_a", "vs_2"), attached("file_b", "vs_2")])
    for job in await claim_all(store):
        text = f"ferry notes of {job.file_id} in {job.vector_store_id}"
        record = replace(
            chunk(f"c_{job.file_id}", text, vec(1, 0, 0), job.file_id), vector_store_id=job.vector_store_id
        )
        assert await store.finish_ingestion(replace(job, status="completed"), [record], NOW + LEASE)
    assert len(await store.vector_search("vs_2", unit(1, 0, 0), None, 10)) == 2
    await store.forget_file("file_a")
    assert await store.all_vector_store_files("vs_1") == []
    assert [f.file_id for f in await store.all_vector_store_files("vs_2")] == ["file_b"]
    assert [h.chunk.file_id for h in await store.keyword_search("vs_2", "ferry", None, 10)] == ["file_b"]
    assert [h.chunk.file_id for h in await store.vector_search("vs_2", unit(1, 0, 0), None, 10)] == ["file_b"]
    assert await store.vector_search("vs_1", unit(1, 0, 0), None, 10) == []
