"""Records as the Vector Stores API shows them: expiry, status and counts computed, never stored."""

from __future__ import annotations

import time

from ferryman.api.vector_stores import (
    ExpiresAfter,
    LastError,
    VectorStore,
    VectorStoreFile,
    VectorStoreFileBatch,
)
from ferryman.api.vector_stores import FileCounts as FileCountsObject
from ferryman.storage.knowledge import FileBatchRecord, FileCounts, VectorStoreFileRecord, VectorStoreRecord

DAY = 86_400


def now() -> int:
    """The current time in unix seconds (what every knowledge record holds)."""
    return int(time.time())


def expires_at(record: VectorStoreRecord) -> int | None:
    """When the store expires: ``days`` after its last activity (None: never)."""
    if not record.expires_after:
        return None
    return record.last_active_at + int(record.expires_after.get("days", 0)) * DAY


def expired(record: VectorStoreRecord, at: int | None = None) -> bool:
    """Whether the store has expired."""
    end = expires_at(record)
    return end is not None and (now() if at is None else at) >= end


def counts_object(counts: FileCounts) -> FileCountsObject:
    """Counts on the wire, with their total."""
    return FileCountsObject(
        in_progress=counts.in_progress,
        completed=counts.completed,
        failed=counts.failed,
        cancelled=counts.cancelled,
        total=counts.total,
    )


def store_object(record: VectorStoreRecord, counts: FileCounts, usage_bytes: int) -> VectorStore:
    """A store on the wire."""
    status = "expired" if expired(record) else "in_progress" if counts.in_progress else "completed"
    return VectorStore(
        id=record.vector_store_id,
        created_at=record.created_at,
        name=record.name,
        usage_bytes=usage_bytes,
        file_counts=counts_object(counts),
        status=status,
        expires_after=ExpiresAfter.model_validate(record.expires_after) if record.expires_after else None,
        expires_at=expires_at(record),
        last_active_at=record.last_active_at,
        metadata=record.metadata,
        embedding_model=record.embedding_model,
        embedding_dimension=record.embedding_dimension,
        provider_id=record.provider_id,
    )


def file_object(record: VectorStoreFileRecord) -> VectorStoreFile:
    """An attachment on the wire."""
    error = record.last_error
    return VectorStoreFile(
        id=record.file_id,
        created_at=record.created_at,
        vector_store_id=record.vector_store_id,
        status=record.status,
        usage_bytes=record.usage_bytes,
        last_error=LastError(code=error.code, message=error.message) if error is not None else None,
        attributes=dict(record.attributes),
        chunking_strategy=record.chunking_strategy or None,
    )


def batch_object(record: FileBatchRecord, counts: FileCounts) -> VectorStoreFileBatch:
    """A batch on the wire: cancelled, in progress while any file is, failed if every file failed, else completed."""
    if record.cancelled:
        status = "cancelled"
    elif counts.in_progress:
        status = "in_progress"
    elif counts.total and counts.failed == counts.total:
        status = "failed"
    else:
        status = "completed"
    return VectorStoreFileBatch(
        id=record.batch_id,
        created_at=record.created_at,
        vector_store_id=record.vector_store_id,
        status=status,
        file_counts=counts_object(counts),
    )
