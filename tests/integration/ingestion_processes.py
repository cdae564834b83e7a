"""Ingestion in real ``ferryman serve`` processes: embeddings from the scripted server, chunks read back from storage.

The scripted server embeds (deterministic 8-dimension vectors) under the model id
:data:`EMBEDDING_MODEL`, and holds an embeddings request whose text carries
``[[hold:GATE]]`` until the test opens ``GATE``: a job is then claimed and
mid-way, with no timing involved.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import yaml
from integration_helpers import wait_for

from ferryman.knowledge.chunking import chunk_text
from ferryman.knowledge.extract import extract_text
from ferryman.storage.knowledge import ChunkRecord
from ferryman.storage.select import store_for

EMBEDDING_MODEL = "scripted-embedding"
MAX_TOKENS, OVERLAP = 100, 20
STATIC: dict[str, Any] = {
    "type": "static",
    "static": {"max_chunk_size_tokens": MAX_TOKENS, "chunk_overlap_tokens": OVERLAP},
}
INGESTED_LOG = "ingested file "
"""How the worker's INFO line about a stored ingestion begins."""


def ingestion_config(tmp: Path, lease_seconds: float = 60.0) -> str:
    """A config file: the scripted server's embedding model (no local one), files under ``tmp``; its path."""
    config = {
        "embeddings": {"local": False, "default_model": EMBEDDING_MODEL},
        "models": [
            {
                "model_id": EMBEDDING_MODEL,
                "provider_id": "remote",
                "model_type": "embedding",
                "metadata": {"embedding_dimension": 8},
            }
        ],
        "files": {"dir": str(tmp / "files"), "ingestion_lease_seconds": lease_seconds},
    }
    path = tmp / "ingestion.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return str(path)


def document(topic: str, sentences: int = 40, hold: str | None = None) -> bytes:
    """A text of several chunks about ``topic`` (holding its embedding at gate ``hold``, if given)."""
    lines = [f"Sentence {i} about {topic}: the ferry crosses the river and the toll is paid." for i in range(sentences)]
    if hold is not None:
        lines.insert(sentences // 2, f"[[hold:{hold}]]")
    return "\n".join(lines).encode()


def expected_chunks(name: str, data: bytes) -> int:
    """How many chunks one ingestion of the file makes."""
    return len(chunk_text(extract_text(data, name, "text/plain"), MAX_TOKENS, OVERLAP))


def upload(http: httpx.Client, name: str, data: bytes) -> str:
    """Upload a text file; its id."""
    answer = http.post("/v1/files", files={"file": (name, data, "text/plain")}, data={"purpose": "assistants"})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


def wait_until_completed(http: httpx.Client, store_id: str, total: int) -> dict[str, Any]:
    """Poll the store (another process ingests) until all ``total`` files completed; the store."""

    def check() -> dict[str, Any] | None:
        store: dict[str, Any] = http.get(f"/v1/vector_stores/{store_id}").json()
        counts = store["file_counts"]
        assert counts["failed"] == 0 and counts["cancelled"] == 0, store
        return store if counts["completed"] == total else None

    return wait_for(check, timeout=60, what=f"{total} files of {store_id} to be ingested")


def stored_chunks(db: str, store_id: str, file_ids: list[str]) -> dict[str, list[ChunkRecord]]:
    """Every chunk each file has in the store, read straight from the database the servers share."""

    async def read() -> dict[str, list[ChunkRecord]]:
        store = store_for(db)
        await store.open()
        try:
            return {f: (await store.list_chunks(store_id, f, None, 100_000)).items for f in file_ids}
        finally:
            await store.close()

    return asyncio.run(read())
