"""The ingestion worker: turns attached files into searchable chunks, in the background, once.

An attached file is a job in storage. Each process runs one worker that claims
jobs with a lease (renewed on every third of it while it works), reads the file's
bytes, extracts its text, chunks it with the attachment's strategy, embeds the
chunks with the store's model, and stores them with the job's outcome in one
write that succeeds only while the claim is still its own (a cancelled, detached
or deleted job writes nothing, and one whose renewal finds the claim lost is
abandoned at once). A job of a replica that died is claimed again
once its lease lapses; a process alone on its database (SQLite) takes over every
unfinished job at start. The worker wakes at once when a job is added here, and
on a beat for jobs added by other replicas.

A file's text is extracted under limits (:mod:`.isolated`). Each time the worker
runs out of jobs, it hands the memory they freed back to the system, so that a
large file costs memory only while it is processed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta

from ferryman.errors import FerrymanError, NotFoundError
from ferryman.heap import release_freed_memory
from ferryman.ids import new_id, utcnow
from ferryman.inference.router import ModelRouter
from ferryman.metrics.instruments import INGESTION_BACKLOG
from ferryman.storage.base import Store
from ferryman.storage.domain.files import files
from ferryman.storage.domain.vector_stores import vector_stores
from ferryman.storage.knowledge import ChunkRecord, LastError, VectorStoreFileRecord

from .blobs import BlobStore
from .chunking import chunk_text, resolve_strategy
from .embedding import embed_chunks
from .extract import UnreadableFile
from .isolated import ExtractionFailed, ExtractionLimits, extract_text_bounded
from .views import now

log = logging.getLogger(__name__)

_FAR_PAST_LAPSE = timedelta(days=365 * 100)
BACKLOG_SECONDS = 10.0
"""How often a worker counts the files waiting or in progress, for the ``ferryman_ingestion_backlog_files`` gauge."""

Key = tuple[str, str]


class IngestionWorker:
    """Claims and runs ingestion jobs.

    Args:
        store: The store (the worker runs as the server: no caller's access applies).
        blobs: Where files' bytes are.
        models: Embeds chunks.
        lease_seconds: How long a claim lasts unrenewed.
        beat_seconds: How often it looks for jobs it was not told about.
        concurrency: Jobs run at once.
        sole_process: This process alone serves the store: at start, every claim is a dead run's.
        extraction: What extracting one file's text may cost (default: :class:`ExtractionLimits`' defaults).
    """

    def __init__(
        self,
        store: Store,
        blobs: BlobStore,
        models: ModelRouter,
        lease_seconds: float = 60.0,
        beat_seconds: float = 3.0,
        concurrency: int = 2,
        sole_process: bool = False,
        extraction: ExtractionLimits | None = None,
    ) -> None:
        self._store = store
        self._files = files(store.kernel)
        self._stores = vector_stores(store.kernel)
        self._blobs = blobs
        self._models = models
        self.lease_seconds = lease_seconds
        self.beat_seconds = beat_seconds
        self.concurrency = concurrency
        self._sole_process = sole_process
        self.extraction = extraction or ExtractionLimits()
        self._freed = False  # a job ended since memory was last handed back
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._jobs: dict[Key, asyncio.Task[None]] = {}
        self._until: dict[Key, datetime] = {}
        self._claims = asyncio.Lock()
        self._renewed_at = utcnow()
        self._counted_at: float | None = None
        self._stopping = False
        self.idle = asyncio.Event()
        """Set while no job runs here and the last look found none to claim (cleared by :meth:`wake`)."""

    def wake(self) -> None:
        """Look for jobs now (one was just added)."""
        self.idle.clear()
        self._wake.set()

    async def start(self) -> None:
        """Run in the background."""
        self._task = asyncio.create_task(self._run(), name="ingestion")

    async def stop(self) -> None:
        """Stop claiming and cancel the jobs running here (their claims lapse; another run takes them)."""
        # Python 3.11's wait_for can swallow a cancellation that meets its wake-up: the loop also checks the flag.
        self._stopping = True
        self._wake.set()
        tasks = [t for t in (self._task, *self._jobs.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._task = None
        self._jobs.clear()

    def running(self) -> list[Key]:
        """The ``(vector_store_id, file_id)`` of the jobs running here."""
        return list(self._jobs)

    def _lease(self) -> datetime:
        return utcnow() + timedelta(seconds=self.lease_seconds)

    async def _run(self) -> None:
        first = True
        self._stopping = False
        while not self._stopping:
            self._wake.clear()
            try:
                await self._renew_if_due()
                await self._claim(takeover=first and self._sole_process)
                await self._count_backlog_if_due()
                first = False
                if not self._jobs and not self._wake.is_set():  # a wake since this look started: look again
                    if self._freed:
                        self._freed = False
                        await asyncio.to_thread(release_freed_memory)
                    self.idle.set()
            except (FerrymanError, OSError) as exc:
                log.warning("ingestion: claiming jobs failed: %s", exc)
            except Exception:
                log.exception("ingestion: claiming jobs failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.beat_seconds)

    async def _claim(self, takeover: bool) -> None:
        free = self.concurrency - len(self._jobs)
        if free <= 0:
            return
        until = self._lease()
        # At a sole process's start, "now" is far ahead: every claim, however fresh, was a dead run's.
        at = utcnow() + (_FAR_PAST_LAPSE if takeover else timedelta())
        async with self._claims:
            jobs = await self._store.claim_ingestion(at, until, free)
            for job in jobs:
                key = (job.vector_store_id, job.file_id)
                if key in self._jobs:  # attached again while its run here goes on: that run's outcome is stale
                    self._abandon(key)
                self._until[key] = until
                self._jobs[key] = asyncio.create_task(self._job(job), name=f"ingest {job.file_id}")

    async def _count_backlog_if_due(self) -> None:
        """Set the backlog gauge from storage, at most every :data:`BACKLOG_SECONDS` (a count of every store)."""
        clock = asyncio.get_running_loop().time()
        if self._counted_at is not None and clock - self._counted_at < BACKLOG_SECONDS:
            return
        self._counted_at = clock
        INGESTION_BACKLOG.set(await self._store.ingestion_backlog())

    async def _renew_if_due(self) -> None:
        if not self._jobs or utcnow() - self._renewed_at < timedelta(seconds=self.lease_seconds / 3):
            return
        until = self._lease()
        async with self._claims:
            held = [(store, file, self._until[(store, file)]) for store, file in self._jobs]
            renewed = set(await self._store.renew_ingestion(held, until))
            for store, file, _ in held:
                key = (store, file)
                if key in renewed:
                    self._until[key] = until
                else:
                    self._abandon(key)
            self._renewed_at = utcnow()

    def _abandon(self, key: Key) -> None:
        """Stop a job whose claim is no longer ours (cancelled, detached, or lapsed and claimed elsewhere)."""
        log.info("ingestion of file %s in vector store %s abandoned: its claim was lost", key[1], key[0])
        task = self._jobs.pop(key, None)
        self._until.pop(key, None)
        if task is not None:
            task.cancel()

    async def _job(self, job: VectorStoreFileRecord) -> None:
        key = (job.vector_store_id, job.file_id)
        try:
            chunks = await self._ingest(job)
        except UnreadableFile as exc:
            chunks = _failed(job, exc.code, exc.message)
        except ExtractionFailed as exc:
            log.warning("extracting the text of file %s failed: %s", job.file_id, exc)
            chunks = _failed(job, "server_error", "the server failed to process the file")
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug in one job fails that job, never the worker
            log.exception("ingestion of file %s failed", job.file_id)
            chunks = _failed(job, "server_error", "the server failed to process the file")
        try:
            async with self._claims:
                wrote = await self._store.finish_ingestion(job, chunks, self._until[key])
                self._release(key)  # finished or not, no claim of ours is left to renew
            if wrote:
                log.info(
                    "ingested file %s into vector store %s: %s, %d chunks",
                    job.file_id,
                    job.vector_store_id,
                    job.status,
                    len(chunks),
                )
                await self._stores.touch(job.vector_store_id, now())
        except (FerrymanError, OSError) as exc:
            log.warning("ingestion of file %s not stored (its lease will lapse): %s", job.file_id, exc)
        except Exception:  # the database refused what the job made: retrying would fail the same way forever
            log.exception("storing the chunks of file %s failed", job.file_id)
            await self._store_failure(job, key)
        finally:
            self._release(key)
            self._freed = True
            self._wake.set()

    async def _store_failure(self, job: VectorStoreFileRecord, key: Key) -> None:
        """Record a job whose chunks could not be stored as failed, under its claim (if it still holds)."""
        until = self._until.get(key)
        if until is None:
            return
        no_chunks = _failed(job, "server_error", "the server failed to store the file's chunks")
        try:
            async with self._claims:
                await self._store.finish_ingestion(job, no_chunks, until)
        except Exception:
            log.exception("recording the failure of file %s failed (its lease will lapse)", job.file_id)

    def _release(self, key: Key) -> None:
        """Forget this task's job (unless it was abandoned and the key is another task's since)."""
        if self._jobs.get(key) is asyncio.current_task():
            del self._jobs[key]
            self._until.pop(key, None)

    async def _ingest(self, job: VectorStoreFileRecord) -> list[ChunkRecord]:
        """The job's chunks (``job`` then completed), or none (``job`` then failed)."""
        try:
            store = await self._stores.get(job.vector_store_id)
            file = await self._files.get(job.file_id)
            data = await self._blobs.get(job.file_id)
        except NotFoundError:
            return _failed(job, "invalid_file", "the file was deleted before it was processed")
        if file.expired_at(now()):  # missing to every caller already; the expiry sweep deletes it
            return _failed(job, "invalid_file", "the file expired before it was processed")
        text = await extract_text_bounded(data, file.filename, file.mime_type, self.extraction)
        del data  # not held while the chunks are embedded
        static = (job.chunking_strategy or store.chunking_strategy or resolve_strategy(None))["static"]
        spans = await asyncio.to_thread(
            chunk_text, text, int(static["max_chunk_size_tokens"]), int(static["chunk_overlap_tokens"])
        )
        del text
        if not spans:
            return _failed(job, "invalid_file", "the file holds no text")
        drafts = [
            ChunkRecord(
                chunk_id=new_id("chunk"),
                vector_store_id=job.vector_store_id,
                file_id=job.file_id,
                position=position,
                text=span.text,
                embedding=b"",
                token_count=span.token_count,
                metadata={"filename": file.filename, "start": span.start, "end": span.end},
            )
            for position, span in enumerate(spans)
        ]
        try:
            chunks = await embed_chunks(self._models, store, drafts)
        except FerrymanError as exc:
            log.warning("embedding file %s failed: %s", job.file_id, exc)
            return _failed(job, "server_error", f"embedding with model '{store.embedding_model}' failed")
        job.status = "completed"
        job.last_error = None
        job.usage_bytes = sum(len(c.text.encode()) + len(c.embedding) for c in chunks)
        return chunks


def _failed(job: VectorStoreFileRecord, code: str, message: str) -> list[ChunkRecord]:
    job.status = "failed"
    job.last_error = LastError(code=code, message=message)  # type: ignore[arg-type]
    job.usage_bytes = 0
    return []
