"""Vector stores' settings as records of the kernel (what the chunk index keeps of a store is not here).

A vector store is a root record of kind ``vector_store``, its body the
:class:`VectorStoreRecord`'s fields, created at its ``created_at``; its owner
rides in the record's own write, so a caller's page of stores is filtered in
the query. Its attachments, batches and chunks are the knowledge store's, kept
under the same id and written with the record (see
:meth:`~ferryman.storage.knowledge.KnowledgeStore.create_vector_store`).
"""

from __future__ import annotations

from dataclasses import asdict

from ..kernel.model import Json
from ..kernel.protocol import Kernel
from ..knowledge import VectorStoreRecord
from .kinds import VECTOR_STORE
from .records import Records


class VectorStoreCodec:
    """A vector store's settings as its fields."""

    def dump(self, value: VectorStoreRecord) -> Json:
        """The store's body."""
        return asdict(value)

    def load(self, body: Json) -> VectorStoreRecord:
        """The store ``dump`` stored."""
        return VectorStoreRecord(**body)


def vector_stores(kernel: Kernel) -> Records[VectorStoreRecord]:
    """Vector stores, by id, in creation order."""
    return Records(kernel, VECTOR_STORE, VectorStoreCodec(), lambda store: store.vector_store_id)
