"""Ingestion jobs (files attached to vector stores, still in progress), claimed under leases.

A claim is one statement: the jobs it takes are locked and skipped by other
replicas' claims on PostgreSQL (``FOR UPDATE SKIP LOCKED``); on SQLite the one
writer runs claims one after another. A job's outcome is written only while its
lease is still the one its claimer was given (compared exactly as stored), so a
job cancelled, detached or claimed again meanwhile writes nothing.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from ferryman.storage.knowledge import ChunkRecord, VectorStoreFileRecord
from ferryman.storage.sql.attachments import FILE_COLUMNS, error_json, file_record
from ferryman.storage.sql.chunk_changes import drop_files_chunks, insert_chunks, moved
from ferryman.storage.sql.dialects import Compiled, SqlDialect, p
from ferryman.storage.sql.domain_tables import vector_store_files
from ferryman.storage.sql.seam import Driver, Row, Work, count, rows


def _claim(d: SqlDialect) -> Compiled:
    """Lease up to ``:limit`` in-progress files unclaimed or lapsed by ``:now``, oldest first, until ``:until``;
    returns their rows of :data:`~.attachments.FILE_COLUMNS`."""

    def build() -> sa.Update:
        t, files = vector_store_files.alias("t"), vector_store_files.c
        lapsed = sa.or_(t.c.lease_until.is_(None), t.c.lease_until < p("now"))
        # The status is written out, not bound: the partial index of files in progress then serves the claim.
        running = t.c.status == sa.literal_column("'in_progress'")
        # The jobs are picked once (a materialized CTE): as a plain ``IN (subquery)``, PostgreSQL may scan the
        # subquery again for each row it updates, each scan past the rows already leased: more than ``limit``.
        # Replicas claim at the same moment without waiting on each other (no lock at all on SQLite).
        picked = (
            sa.select(t.c.vector_store_id, t.c.file_id)
            .where(running, lapsed)
            .order_by(t.c.created_at, t.c.file_id)
            .limit(p("limit"))
            .with_for_update(of=t, skip_locked=True)
            .cte("picked")
            .prefix_with("MATERIALIZED")
        )
        return (
            sa.update(vector_store_files)
            .where(
                sa.tuple_(files.vector_store_id, files.file_id).in_(
                    sa.select(picked.c.vector_store_id, picked.c.file_id)
                )
            )
            .values(lease_until=p("until"))
            .returning(*FILE_COLUMNS)
        )

    return d.compiled("ingest.claim", build)


class IngestionTables:
    """Claiming, renewing and finishing ingestion jobs, over a :class:`Driver`."""

    _db: Driver

    async def claim_ingestion(self, now: datetime, until: datetime, limit: int) -> list[VectorStoreFileRecord]:
        """Claim up to ``limit`` in-progress files whose claim is absent or lapsed, oldest first, until ``until``."""
        d = self._db.dialect
        found: list[Row] = await self._db.write(_claim(d).rows(until=d.epoch(until), now=d.epoch(now), limit=limit))
        jobs = [file_record(d, row) for row in found]
        return sorted(jobs, key=lambda job: (job.created_at, job.file_id))

    async def ingestion_backlog(self) -> int:
        """How many attached files are still in progress (waiting for a claim or being processed)."""
        found: list[Row] = await self._db.read(
            rows("SELECT count(*) FROM vector_store_files WHERE status = 'in_progress'")
        )
        return int(found[0][0])

    async def renew_ingestion(self, jobs: list[tuple[str, str, datetime]], until: datetime) -> list[tuple[str, str]]:
        """Extend the claims still in progress under the lease each job names; returns the jobs renewed."""
        d = self._db.dialect

        def work() -> Work[list[tuple[str, str]]]:
            renewed: list[tuple[str, str]] = []
            for store, file, held in jobs:
                changed = yield count(
                    "UPDATE vector_store_files SET lease_until = :until WHERE vector_store_id = :vector_store_id "
                    "AND file_id = :file_id AND status = 'in_progress' AND lease_until = :held",
                    until=d.epoch(until),
                    vector_store_id=store,
                    file_id=file,
                    held=d.epoch(held),
                )
                if changed:
                    renewed.append((store, file))
            return renewed

        if not jobs:
            return []
        return await self._db.write(work())

    async def finish_ingestion(
        self, job: VectorStoreFileRecord, chunks: list[ChunkRecord], claimed_until: datetime
    ) -> bool:
        """Store a job's outcome and its chunks in one transaction, only while the claim is still the claimer's."""
        d = self._db.dialect

        def work() -> Work[bool]:
            # The store's row first, as every writer of its chunks takes it (a claim lapsed meanwhile moves its
            # version for nothing: an index then reads no change).
            version = yield from moved(job.vector_store_id)
            if version is None:
                return False
            finished = yield count(
                "UPDATE vector_store_files SET status = :status, last_error = :last_error, "
                "usage_bytes = :usage_bytes, lease_until = NULL WHERE vector_store_id = :vector_store_id "
                "AND file_id = :file_id AND status = 'in_progress' AND lease_until = :claimed_until",
                status=job.status,
                last_error=error_json(job.last_error),
                usage_bytes=job.usage_bytes,
                vector_store_id=job.vector_store_id,
                file_id=job.file_id,
                claimed_until=d.epoch(claimed_until),
            )
            if not finished:
                return False
            # One version for both: the file's removal drops only what came before it, and the new chunks stay.
            yield from drop_files_chunks(d, job.vector_store_id, [job.file_id], version)
            if chunks:
                yield from insert_chunks(d, job.vector_store_id, chunks, version)
            return True

        return await self._db.write(work())
