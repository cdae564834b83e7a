"""``python -m bench.vector_store_reads``: what reading a vector store costs as its files grow, per backend.

A store's view (``GET /v1/vector_stores/{id}``, and each store of a list's page) shows its file counts and the
bytes its files hold; a search (``POST /v1/vector_stores/{id}/search``) shows each result's file attributes and
name. The database holds ``--stores`` stores of ``--files`` ingested files each (one chunk per file), and this
times, through the app in process (auth off), median and p95 of ``--repeat`` calls in milliseconds after two
warm-ups:

* ``get``: one store's view;
* ``list``: the first page of 20 stores;
* ``search``: a keyword search of one store for its 10 best chunks.

SQLite always; PostgreSQL and Redis when their URLs are given. Nothing here runs as a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from ferryman.server.app import build_services, create_app
from ferryman.storage.base import Store
from ferryman.storage.knowledge import ChunkRecord, VectorStoreFileRecord, VectorStoreRecord
from ferryman.testing import ScriptedModel

from .knowledge_backends import backend_arguments, chosen, report, sites
from .owner_listing import timed

_CLAIMED = 500
_LEASE = timedelta(minutes=10)
_EMBEDDING = bytes(12)  # three float32 zeros: keyword search reads no vector


def _store_record(index: int) -> VectorStoreRecord:
    return VectorStoreRecord(
        vector_store_id=f"vs_bench_{index:03d}",
        name=f"store {index}",
        created_at=1_700_000_000 + index,
        embedding_model="all-MiniLM-L6-v2",
        embedding_dimension=3,
        chunking_strategy={"type": "auto"},
        last_active_at=1_700_000_000 + index,
    )


def _chunk(job: VectorStoreFileRecord) -> ChunkRecord:
    number = job.file_id.rsplit("_", 1)[-1]
    return ChunkRecord(
        chunk_id=f"{job.file_id}_0",
        vector_store_id=job.vector_store_id,
        file_id=job.file_id,
        position=0,
        text=f"ferry crossing log {number} harbour tide",
        embedding=_EMBEDDING,
        token_count=6,
        metadata={"filename": f"{job.file_id}.txt"},
    )


async def _seed(store: Store, stores: int, files: int) -> None:
    """``stores`` stores of ``files`` files each, every file ingested (its usage and one chunk stored)."""
    for index in range(stores):
        record = _store_record(index)
        attached = [
            VectorStoreFileRecord(vector_store_id=record.vector_store_id, file_id=f"file_{index}_{n}", created_at=n)
            for n in range(files)
        ]
        await store.create_vector_store(record, attached)
    now = datetime.now(UTC)
    while jobs := await store.claim_ingestion(now, now + _LEASE, _CLAIMED):
        for job in jobs:
            job.status, job.usage_bytes = "completed", 100
            await store.finish_ingestion(job, [_chunk(job)], now + _LEASE)


async def _measure(store: Store, repeat: int) -> dict[str, dict[str, float]]:
    services = build_services(store, [ScriptedModel(model_ids=("scripted-model",))])
    app = create_app(services)
    transport = httpx.ASGITransport(app=app)
    first = _store_record(0).vector_store_id
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://bench", timeout=60) as http,
    ):

        async def get() -> None:
            answer = await http.get(f"/v1/vector_stores/{first}")
            assert answer.status_code == 200 and answer.json()["file_counts"]["completed"] > 0, answer.text

        async def listed() -> None:
            answer = await http.get("/v1/vector_stores", params={"limit": 20})
            assert answer.status_code == 200 and answer.json()["data"], answer.text

        async def search() -> None:
            body = {"query": "harbour tide", "search_mode": "keyword", "max_num_results": 10}
            answer = await http.post(f"/v1/vector_stores/{first}/search", json=body)
            assert answer.status_code == 200 and len(answer.json()["data"]) == 10, answer.text

        return {
            "get": await timed(get, repeat),
            "list": await timed(listed, repeat),
            "search": await timed(search, repeat),
        }


async def run(
    stores: int, files: int, repeat: int, postgres: str | None, redis: str | None, only: set[str]
) -> list[dict[str, Any]]:
    """One row per backend and call."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend, make_site in sites(Path(tmp), postgres, redis, chosen(only)).items():
            async with make_site() as site, site.open() as store:
                await _seed(store, stores, files)
                for call, figures in (await _measure(store, repeat)).items():
                    rows.append({"backend": backend, "call": call, "stores": stores, "files": files, **figures})
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| backend | call | stores x files | median ms | p95 ms |", "|---|---|---|---|---|"]
    for row in rows:
        lines.append(
            f"| {row['backend']} | {row['call']} | {row['stores']} x {row['files']:,} "
            f"| {row['median_ms']:.2f} | {row['p95_ms']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table, and write the rows as JSON when ``--out`` is given."""
    parser = argparse.ArgumentParser(prog="python -m bench.vector_store_reads", description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=int, default=20, help="vector stores in the database")
    parser.add_argument("--files", type=int, nargs="+", default=[2000], help="ingested files per store")
    parser.add_argument("--repeat", type=int, default=30, help="timed calls per figure")
    backend_arguments(parser)
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for files in args.files:
        rows += asyncio.run(run(args.stores, files, args.repeat, args.postgres, args.redis, set(args.only)))
    report(_table(rows), rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
