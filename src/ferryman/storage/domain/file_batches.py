"""File batches as records of the kernel, under their vector store.

A batch's record (kind ``file_batch``) holds its id, its store's, its creation time and whether it was
cancelled. Its files are the knowledge store's attachments, each naming the batch: a backend attaches them in
the same write as :func:`batch_written` (see
:meth:`~ferryman.storage.knowledge.VectorStoreStore.add_vector_store_files`), and cancels those still in
progress in the same write as :func:`batch_cancelled`. What a batch shows (its status, its counts) comes from
its files.
"""

from __future__ import annotations

from ferryman.errors import InternalError, NotFoundError
from ferryman.storage.domain.kinds import FILE_BATCH
from ferryman.storage.domain.records import FieldsCodec, Records
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.knowledge import FileBatchRecord

_CODEC = FieldsCodec(FileBatchRecord)


def batch_written(vector_store_id: str, record: FileBatchRecord) -> ops.Put:
    """The write of a new batch's record under its store (``NotFoundError`` in the batch when the store is missing,
    ``ConflictError`` when the id is taken).

    Raises:
        InternalError: the record is another store's.
    """
    if record.vector_store_id != vector_store_id:
        raise InternalError(f"file batch '{record.batch_id}' is not of vector store '{vector_store_id}'")
    return ops.Put(FILE_BATCH, record.batch_id, _CODEC.dump(record), parent=vector_store_id, at=record.created_at)


def batch_cancelled(vector_store_id: str, batch_id: str) -> list[ops.WriteOp]:
    """The writes marking a store's batch cancelled (``NotFoundError`` in the batch when the store has no such
    batch)."""
    return [
        ops.Check(FILE_BATCH, batch_id, parent=vector_store_id),
        ops.Patch(FILE_BATCH, batch_id, merge={"cancelled": True}),
    ]


def batch_missing(vector_store_id: str, batch_id: str) -> NotFoundError:
    """What a read or cancel of a batch the store does not have raises."""
    return NotFoundError(f"file batch '{batch_id}' not found in vector store '{vector_store_id}'")


async def file_batch(kernel: Kernel, vector_store_id: str, batch_id: str) -> FileBatchRecord:
    """A store's batch.

    Raises:
        NotFoundError: the store has no such batch.
    """
    found = await Records(kernel, FILE_BATCH, _CODEC, lambda batch: batch.batch_id).find(
        batch_id, parent=vector_store_id
    )
    if found is None:
        raise batch_missing(vector_store_id, batch_id)
    return found.value
