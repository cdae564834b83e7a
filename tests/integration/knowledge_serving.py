"""Ferryman in process with the local embedding model, for the files and vector stores tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.inprocess import serving

from ferryman.inference import minilm
from ferryman.inference.local_embeddings import LocalEmbeddingProvider, local_embeddings_available
from ferryman.knowledge.blobs import LocalBlobStore
from ferryman.server.app import Services, build_services
from ferryman.storage.sql.sqlite import SqliteStore

needs_model = pytest.mark.skipif(not local_embeddings_available(), reason="all-MiniLM-L6-v2 is not installed")


class _Shared(LocalEmbeddingProvider):
    """A provider per app (its lock is its event loop's) sharing one model: the weights load once per process."""

    _model: minilm.MiniLM | None = None

    def _encode(self, texts: list[str]) -> minilm.Matrix:
        if _Shared._model is None:
            _Shared._model = minilm.MiniLM()
        self._encoder = _Shared._model
        return super()._encode(texts)


@asynccontextmanager
async def knowledge_app(tmp_path: Path, **options: Any) -> AsyncIterator[tuple[httpx.AsyncClient, Services]]:
    """A client of an app over SQLite with the local embedding model, and its services."""
    services = build_services(
        SqliteStore(str(tmp_path / "knowledge.db")),
        [_Shared()],
        sole_process=True,
        blobs=LocalBlobStore(tmp_path / "files"),
        **options,
    )
    async with serving(services) as http:
        yield http, services


async def upload(http: httpx.AsyncClient, name: str, data: bytes, purpose: str = "assistants") -> dict[str, Any]:
    """Upload a file; its object."""
    answer = await http.post("/v1/files", files={"file": (name, data, "text/plain")}, data={"purpose": purpose})
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


async def settled(services: Services) -> None:
    """Return once the ingestion worker has nothing left to do (woken by it, no polling)."""
    async with asyncio.timeout(60):
        await services.ingestion.idle.wait()
