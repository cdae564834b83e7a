"""A file attached again while this process still ingests it: only the new attachment's outcome is kept."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from knowledge_serving import _Shared, needs_model, settled, upload
from tests.inprocess import serving

from ferryman.knowledge.blobs import LocalBlobStore
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore

pytestmark = [pytest.mark.anyio, needs_model]

TEXT = " ".join(f"Sentence {n} tells of the ferry that crosses the river at dawn." for n in range(40)).encode()
SMALL = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}}


class GatedBlobs(LocalBlobStore):
    """Blobs whose every read waits for the test to open its gate (the ingestion in flight, held)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.reads: asyncio.Queue[asyncio.Event] = asyncio.Queue()

    async def get(self, file_id: str) -> bytes:
        gate = asyncio.Event()
        self.reads.put_nowait(gate)
        await gate.wait()
        return await super().get(file_id)


async def test_a_file_attached_again_mid_ingestion_ends_with_the_new_attachments_chunks(tmp_path: Path) -> None:
    blobs = GatedBlobs(tmp_path / "files")
    services = build_services(SqliteStore(str(tmp_path / "knowledge.db")), [_Shared()], sole_process=True, blobs=blobs)
    async with serving(services) as http:
        file_id = (await upload(http, "ferry.txt", TEXT))["id"]
        created = await http.post("/v1/vector_stores", json={"name": "s", "file_ids": [file_id]})
        store_id = created.json()["id"]
        first = await blobs.reads.get()  # the first attachment's ingestion, held while it reads the file
        again = await http.post(
            f"/v1/vector_stores/{store_id}/files", json={"file_id": file_id, "chunking_strategy": SMALL}
        )
        assert again.status_code == 200, again.text
        second = await blobs.reads.get()  # the second attachment's, claimed by the same worker
        first.set()
        second.set()
        await settled(services)
        attached = (await http.get(f"/v1/vector_stores/{store_id}/files/{file_id}")).json()
        chunks = await services.vector_stores.chunks(store_id, file_id)
    assert attached["status"] == "completed" and attached["chunking_strategy"] == SMALL
    sizes = [chunk.token_count for chunk in chunks]
    assert sizes and max(sizes) <= 100, f"the first attachment's chunks (800 tokens at most) were kept: {sizes}"
