"""A vector store of a few files, written straight into the in-process server's store, for file_search tests.

The chunks are the files' whole texts, with zero embeddings: the tests search by
keyword (``ranker: "keyword"``), so no embedding model is needed to find them.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from ferryman.storage.domain.files import files as file_records
from ferryman.storage.knowledge import ChunkRecord, FileRecord, VectorStoreFileRecord, VectorStoreRecord
from inprocess import Served

DIMENSION = 384
KEYWORD_SEARCH = {"ranker": "keyword"}
"""``ranking_options`` that need no embedding model."""


@dataclass(frozen=True)
class SeededStore:
    """A vector store and its files, by filename."""

    vector_store_id: str
    file_ids: dict[str, str]


def seed_vector_store(model: Served, files: dict[str, str]) -> SeededStore:
    """A completed vector store holding ``files`` (filename -> text), owned by the server's anonymous caller."""
    now = int(time.time())
    store_id = f"vs_{uuid.uuid4().hex}"
    file_ids = {name: f"file-{uuid.uuid4().hex[:24]}" for name in files}
    record = VectorStoreRecord(store_id, "file search test", now, "all-MiniLM-L6-v2", DIMENSION)
    attached = [VectorStoreFileRecord(store_id, file_ids[name], now, status="completed") for name in files]
    chunks = [
        ChunkRecord(f"{file_ids[name]}-0", store_id, file_ids[name], 0, text, bytes(4 * DIMENSION), len(text.split()))
        for name, text in files.items()
    ]
    store = model.services.store

    async def write() -> None:
        for name, text in files.items():
            await file_records(store.kernel).create(
                FileRecord(file_ids[name], name, "assistants", len(text.encode()), now, "text/plain")
            )
        await store.create_vector_store(record, attached)
        await store.add_chunks(store_id, chunks)

    model.call(write)
    return SeededStore(store_id, file_ids)
