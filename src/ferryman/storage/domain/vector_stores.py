"""Vector stores' settings as records of the kernel (what the chunk index keeps of a store is not here).

A vector store is a root record of kind ``vector_store``, its body the
:class:`VectorStoreRecord`'s fields, created at its ``created_at``; its owner
rides in the record's own write, so a caller's page of stores is filtered in
the query. Its attachments, batches and chunks are the knowledge store's, kept
under the same id and written with the record (see
:meth:`~ferryman.storage.knowledge.KnowledgeStore.create_vector_store`).
"""

from __future__ import annotations

from ferryman.storage.domain.kinds import VECTOR_STORE
from ferryman.storage.domain.records import FieldsCodec, Records
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.knowledge import VectorStoreRecord


class VectorStoreRecords(Records[VectorStoreRecord]):
    """Vector stores' records as the server reads them (no caller checked: the services check theirs).

    Args:
        kernel: The backend.
    """

    def __init__(self, kernel: Kernel) -> None:
        codec = FieldsCodec(VectorStoreRecord)
        super().__init__(kernel, VECTOR_STORE, codec, lambda store: store.vector_store_id, lambda s: s.created_at)

    async def record(self, vector_store_id: str) -> VectorStoreRecord:
        """A store's record (NotFoundError if it is missing)."""
        return await self.get(vector_store_id)

    async def touch(self, vector_store_id: str, at: int) -> None:
        """Record a store's activity (``last_active_at``, its expiry's anchor); nothing when it is gone."""
        await self.kernel.write([touched(vector_store_id, at)])


def vector_stores(kernel: Kernel) -> VectorStoreRecords:
    """Vector stores, by id, in creation order."""
    return VectorStoreRecords(kernel)


def touched(vector_store_id: str, at: int) -> ops.Patch:
    """The write of a store's activity (``last_active_at``, its expiry's anchor); nothing when it is gone."""
    return ops.Patch(VECTOR_STORE, vector_store_id, merge={"last_active_at": at}, required=False)
