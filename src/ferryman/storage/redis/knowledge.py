"""Files, vector stores, their attachments and batches, and ingestion claims, in Redis.

A vector store's attachments are hashes beside sorted sets that all score a
file by the same attachment number (every attachment, one per status, one per
batch), so a filtered page is a score range after the cursor's number. Every
write that checks or cascades is a script of :mod:`.lua_knowledge`.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Any, cast

from ferryman.errors import NotFoundError
from ferryman.storage.base import KeySettlement
from ferryman.storage.domain.file_batches import batch_cancelled, batch_written
from ferryman.storage.domain.kinds import VECTOR_STORE as VECTOR_STORE_KIND
from ferryman.storage.domain.vector_stores import vector_stores
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.knowledge import (
    FileBatchRecord,
    FileCounts,
    IngestionStatus,
    LastError,
    StoreFiles,
    VectorStoreFileRecord,
    VectorStoreRecord,
)
from ferryman.storage.page import Page
from ferryman.storage.redis.idempotency import settlement_args
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.storage.redis.lua_chunks import (
    CLAIM_INGESTION,
    RENEW_INGESTION,
    VS_FILE_FIELDS,
    ClaimIngestion,
    RenewIngestion,
    claimed_rows,
)
from ferryman.storage.redis.lua_knowledge import (
    ATTACH_FILES,
    CANCEL_BATCH,
    CREATE_VECTOR_STORE,
    DELETE_VECTOR_STORE,
    DETACH_FILE,
    FORGET_FILE,
    STORE_FILES,
    UPDATE_STORE_FILE,
    AttachFiles,
    CancelBatch,
    CreateVectorStore,
    DeleteVectorStore,
    FileId,
    StoreFile,
    StoreIds,
    UpdateStoreFile,
)
from ferryman.storage.redis.scripts import RedisBase
from ferryman.storage.redis.store_keys import (
    BATCH_FILES,
    INGESTION,
    VS_FILE,
    VS_FILES,
)


def _attachments(files: list[VectorStoreFileRecord]) -> dict[str, Any]:
    """The :class:`Attachments` lists of these files."""
    return {
        "file_ids": [f.file_id for f in files],
        "statuses": [f.status for f in files],
        "created_ats": [str(f.created_at) for f in files],
        "attributes": [json.dumps(f.attributes) for f in files],
        "strategies": [json.dumps(f.chunking_strategy) for f in files],
        "usages": [str(f.usage_bytes) for f in files],
        "errors": [json.dumps(asdict(f.last_error)) if f.last_error else "" for f in files],
        "batch_ids": [f.batch_id or "" for f in files],
    }


def attachment_of(vector_store_id: str, file_id: str, values: list[Any]) -> VectorStoreFileRecord:
    """An attachment from its hash's :data:`~.lua_chunks.VS_FILE_FIELDS`."""
    created_at, status, attributes, strategy, usage, last_error, batch_id = values
    return VectorStoreFileRecord(
        vector_store_id=vector_store_id,
        file_id=file_id,
        created_at=int(created_at),
        status=status,
        attributes=json.loads(attributes),
        chunking_strategy=json.loads(strategy),
        usage_bytes=int(usage),
        last_error=LastError(**json.loads(last_error)) if last_error else None,
        batch_id=batch_id or None,
    )


class RedisKnowledge(RedisBase):
    """Files, vector stores, attachments, batches and ingestion claims over the backend's scripts."""

    kernel: RedisKernel

    # ---- files -------------------------------------------------------------

    async def forget_file(self, file_id: str) -> None:
        """Detach a file from every vector store, with its chunks there (nothing when it is attached nowhere)."""
        await self._run(FORGET_FILE, FileId(file_id))

    # ---- vector stores -----------------------------------------------------

    async def create_vector_store(
        self,
        record: VectorStoreRecord,
        files: list[VectorStoreFileRecord],
        owner: Owner | None = None,
        settle: KeySettlement | None = None,
    ) -> None:
        """Store a new vector store's record (with its owner), its index, its first files and ``settle``'s key
        outcome, in one script.

        Raises:
            ConflictError: the id is taken.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        put = vector_stores(self.kernel).put(record, owner=owner)
        index = CreateVectorStore(
            **self.kernel.embedded([put]),
            **_attachments(files),
            **settlement_args(settle),
            vector_store_id=record.vector_store_id,
        )
        await self._run(CREATE_VECTOR_STORE, index)

    async def delete_vector_store(self, vector_store_id: str) -> None:
        """Delete a vector store's record with its attachments, batches and chunks (NotFoundError if unknown)."""
        delete = ops.Delete(VECTOR_STORE_KIND, vector_store_id)
        index = DeleteVectorStore(**self.kernel.embedded([delete]), vector_store_id=vector_store_id)
        deleted = self.kernel.embedded_results([delete], await self._run(DELETE_VECTOR_STORE, index))[0]
        self._forget_index(vector_store_id)
        if not deleted:
            raise NotFoundError(f"vector store '{vector_store_id}' not found")

    def _forget_index(self, vector_store_id: str) -> None:
        """Drop the in-process search caches of a deleted store (the chunk index's mixin overrides it)."""

    # ---- attachments -------------------------------------------------------

    async def add_vector_store_files(
        self,
        vector_store_id: str,
        files: list[VectorStoreFileRecord],
        settle: KeySettlement | None = None,
        batch: FileBatchRecord | None = None,
    ) -> None:
        """Attach files as new ingestion jobs, with ``settle``'s key outcome and ``batch``'s record, in one script;
        a file attached already is attached again (its chunks dropped)."""
        record = self.kernel.embedded([batch_written(vector_store_id, batch)] if batch is not None else [])
        attach = AttachFiles(
            **record, **_attachments(files), **settlement_args(settle), vector_store_id=vector_store_id
        )
        await self._run(ATTACH_FILES, attach)

    async def list_vector_store_files(
        self,
        vector_store_id: str,
        after: str | None,
        limit: int,
        order: str,
        status: IngestionStatus | None = None,
        batch_id: str | None = None,
    ) -> Page[VectorStoreFileRecord]:
        """A store's attachments by attachment, optionally of one status or batch.

        A batch's files are filtered by status here: a batch is small, and has no index per status.
        """
        every = self._keys.of(VS_FILES, vector_store_id)
        if batch_id is not None:
            index = self._keys.of(BATCH_FILES, batch_id)
        elif status is not None:
            index = self._keys.of(f"vs_{status}", vector_store_id)
        else:
            index = every
        filtered = batch_id is not None and status is not None
        count = -1 if filtered else limit + 1
        ids = await self._ranked(index, every, after, count, order == "desc", "file")
        records = await self._attachments(vector_store_id, ids)
        if batch_id is not None:
            records = [r for r in records if r.batch_id == batch_id and (status is None or r.status == status)]
        return Page(records[:limit], len(records) > limit)

    async def vector_store_files(self, vector_store_id: str, file_ids: list[str]) -> list[VectorStoreFileRecord]:
        """Those of these files attached to the store, in one transaction."""
        return await self._attachments(vector_store_id, list(dict.fromkeys(file_ids)))

    async def store_files(self, vector_store_ids: list[str]) -> dict[str, StoreFiles]:
        """Each store's files by status and the bytes they hold, in one script."""
        if not vector_store_ids:
            return {}
        found = await self._run(STORE_FILES, StoreIds(vector_store_ids))
        return {
            store_id: StoreFiles(FileCounts(*totals[:4]), totals[4])
            for store_id, totals in zip(vector_store_ids, found, strict=True)
        }

    async def update_vector_store_file(
        self, vector_store_id: str, file_id: str, attributes: dict[str, str | float | bool]
    ) -> None:
        """Replace an attachment's attributes; NotFoundError if gone."""
        await self._run(UPDATE_STORE_FILE, UpdateStoreFile(vector_store_id, file_id, json.dumps(attributes)))

    async def delete_vector_store_file(self, vector_store_id: str, file_id: str) -> None:
        """Detach a file and drop its chunks (NotFoundError if not attached)."""
        await self._run(DETACH_FILE, StoreFile(vector_store_id, file_id))

    async def _attachments(self, vector_store_id: str, file_ids: list[str]) -> list[VectorStoreFileRecord]:
        if not file_ids:
            return []
        async with self._db.pipeline(transaction=True) as pipe:
            for file_id in file_ids:
                pipe.hmget(self._keys.pair(VS_FILE, vector_store_id, file_id), VS_FILE_FIELDS)
            rows: list[list[Any]] = await pipe.execute()
        return [
            attachment_of(vector_store_id, file_id, row)
            for file_id, row in zip(file_ids, rows, strict=True)
            if row[0] is not None
        ]

    # ---- batches -----------------------------------------------------------

    async def cancel_file_batch(self, vector_store_id: str, batch_id: str) -> None:
        """Mark a batch cancelled and its files still in progress ``cancelled``, in one script; NotFoundError if
        the store has no such batch."""
        cancelled = self.kernel.embedded(batch_cancelled(vector_store_id, batch_id))
        await self._run(CANCEL_BATCH, CancelBatch(**cancelled, vector_store_id=vector_store_id, batch_id=batch_id))

    # ---- ingestion claims --------------------------------------------------

    async def claim_ingestion(self, now: datetime, until: datetime, limit: int) -> list[VectorStoreFileRecord]:
        """Claim up to ``limit`` in-progress files whose claim is absent or lapsed, leasing them ``until``."""
        if limit <= 0:
            return []
        found = await self._run(CLAIM_INGESTION, ClaimIngestion(now.timestamp(), until.timestamp(), limit))
        jobs: list[VectorStoreFileRecord] = []
        for vector_store_id, file_id, values in claimed_rows(found):
            if values[0] is not None:
                job = attachment_of(vector_store_id, file_id, values)
                job.lease_until = until
                jobs.append(job)
        return jobs

    async def ingestion_backlog(self) -> int:
        """How many attached files are still in progress (waiting for a claim or being processed)."""
        return int(await self._db.zcard(self._keys.global_(INGESTION)))

    async def renew_ingestion(self, jobs: list[tuple[str, str, datetime]], until: datetime) -> list[tuple[str, str]]:
        """Extend the claims still in progress under the lease each job names; returns the jobs renewed."""
        if not jobs:
            return []
        renew = RenewIngestion(
            store_ids=[store for store, _, _ in jobs],
            file_ids=[file for _, file, _ in jobs],
            helds=[repr(held.timestamp()) for _, _, held in jobs],
            lease=until.timestamp(),
        )
        renewed: list[int] = await self._run(RENEW_INGESTION, renew)
        return [(jobs[i][0], jobs[i][1]) for i in renewed]

    # ---- pages -------------------------------------------------------------

    async def _ranked(
        self, index: str, cursors: str, after: str | None, count: int, descending: bool, kind: str
    ) -> list[str]:
        """Up to ``count`` (-1: all) members of ``index`` after the score the cursor has in ``cursors``.

        Raises:
            NotFoundError: the cursor is not in ``cursors``.
        """
        if count == 0:
            return []
        if not after:
            return cast(list[str], await self._db.zrange(index, 0, count - 1 if count > 0 else -1, desc=descending))
        score = await self._db.zscore(cursors, after)
        if score is None:
            raise NotFoundError(f"{kind} '{after}' not found")
        bound = f"({score!r}"
        limit: dict[str, Any] = {} if count < 0 else {"start": 0, "num": count}
        if descending:
            return cast(list[str], await self._db.zrevrangebyscore(index, bound, "-inf", **limit))
        return cast(list[str], await self._db.zrangebyscore(index, bound, "+inf", **limit))
