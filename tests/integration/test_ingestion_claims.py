"""The ingestion worker's claims: renewed under the lease it holds, and a job whose claim is lost is abandoned."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from ferryman.knowledge.blobs import MemoryBlobStore
from ferryman.knowledge.ingest import IngestionWorker
from ferryman.storage.domain.files import files
from ferryman.storage.domain.vector_stores import vector_stores
from ferryman.storage.knowledge import ChunkRecord, FileRecord, VectorStoreFileRecord, VectorStoreRecord
from ferryman.storage.sql.sqlite import SqliteStore

pytestmark = pytest.mark.anyio

TEXT = b"The ferry crosses the river twice a day. " * 20


class WatchedStore(SqliteStore):
    """A real SQLite store that tells the test when the worker renews and finishes."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.renewals: list[list[tuple[str, str]]] = []
        self.renewed_twice = asyncio.Event()
        self.finishes: list[str] = []

    async def renew_ingestion(self, jobs: list[tuple[str, str, datetime]], until: datetime) -> list[tuple[str, str]]:
        renewed = await super().renew_ingestion(jobs, until)
        self.renewals.append(renewed)
        if len([r for r in self.renewals if r]) >= 2:
            self.renewed_twice.set()
        return renewed

    async def finish_ingestion(
        self, job: VectorStoreFileRecord, chunks: list[ChunkRecord], claimed_until: datetime
    ) -> bool:
        self.finishes.append(job.file_id)
        return await super().finish_ingestion(job, chunks, claimed_until)


class HeldEmbeddings:
    """Embeds (3 dimensions) once the gate opens; says when a call is waiting and when one was cancelled."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()
        self.gate = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def embed(self, model_id: str, texts: list[str]) -> list[list[float]]:
        self.waiting.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return [[1.0, float(len(text)), 0.5] for text in texts]


@pytest.fixture()
async def store(tmp_path: Path) -> AsyncIterator[WatchedStore]:
    opened = WatchedStore(str(tmp_path / "claims.db"))
    await opened.open()
    yield opened
    await opened.close()


async def _worker(store: WatchedStore, models: HeldEmbeddings) -> IngestionWorker:
    blobs = MemoryBlobStore()
    await blobs.put("file_a", TEXT)
    await files(store.kernel).create(FileRecord("file_a", "a.txt", "assistants", len(TEXT), 100, "text/plain"))
    record = VectorStoreRecord("vs_1", "docs", 100, "held", 3, last_active_at=100)
    await store.create_vector_store(record, [VectorStoreFileRecord("vs_1", "file_a", 100)])
    models_: Any = models  # the worker needs only ``embed`` of a router
    worker = IngestionWorker(store, blobs, models_, lease_seconds=0.3, beat_seconds=0.02)
    await worker.start()
    return worker


async def test_a_job_held_across_renewals_finishes_under_its_latest_lease(store: WatchedStore) -> None:
    models = HeldEmbeddings()
    worker = await _worker(store, models)
    try:
        with anyio.fail_after(10):
            await models.waiting.wait()
            await store.renewed_twice.wait()
            models.gate.set()
            await worker.idle.wait()
    finally:
        await worker.stop()
    assert store.finishes == ["file_a"]
    assert (await store.get_vector_store_file("vs_1", "file_a")).status == "completed"
    assert len((await store.list_chunks("vs_1", "file_a", None, 100)).items) > 0
    assert (await vector_stores(store.kernel).get("vs_1")).last_active_at > 100


async def test_a_job_whose_claim_is_lost_is_abandoned_without_a_finish(store: WatchedStore) -> None:
    models = HeldEmbeddings()
    worker = await _worker(store, models)
    try:
        with anyio.fail_after(10):
            await models.waiting.wait()
            await store.delete_vector_store_file("vs_1", "file_a")  # the claim goes with the attachment
            await models.cancelled.wait()  # it would wait for the gate forever if it were not abandoned
        assert worker.running() == []
    finally:
        await worker.stop()
    assert store.finishes == []
    assert [] in store.renewals


class RefusingStore(WatchedStore):
    """Refuses the first write of a job's chunks the way a database refuses bad data (not a transient failure)."""

    async def finish_ingestion(
        self, job: VectorStoreFileRecord, chunks: list[ChunkRecord], claimed_until: datetime
    ) -> bool:
        if chunks:
            self.finishes.append(job.file_id)
            raise ValueError("the database refused a value")
        return await super().finish_ingestion(job, chunks, claimed_until)


async def test_a_job_whose_chunks_the_database_refuses_ends_failed_instead_of_retrying_forever(tmp_path: Path) -> None:
    refusing = RefusingStore(str(tmp_path / "refusing.db"))
    await refusing.open()
    models = HeldEmbeddings()
    models.gate.set()
    try:
        worker = await _worker(refusing, models)
        try:
            with anyio.fail_after(10):
                await worker.idle.wait()
        finally:
            await worker.stop()
        attached = await refusing.get_vector_store_file("vs_1", "file_a")
        assert attached.status == "failed"
        assert attached.last_error is not None and attached.last_error.code == "server_error"
        assert refusing.finishes == ["file_a", "file_a"]  # the refused write, then the failure, once each
    finally:
        await refusing.close()
