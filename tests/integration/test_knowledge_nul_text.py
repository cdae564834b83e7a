"""Text holding NUL characters (``\\u0000`` in JSON, some PDFs, a client's chunk) is indexed without them.

PostgreSQL's text columns cannot hold NUL: such a chunk failed its insert (a 500
for vector-io, an ingestion job retried forever) until the text dropped it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from knowledge_serving import _Shared, needs_model, settled, upload
from storage_backends import POSTGRES_URL, postgres_store
from tests.inprocess import serving

from ferryman.knowledge.extract import extract_text
from ferryman.server.app import build_services
from ferryman.storage.sql.postgres import PostgresStore

pytestmark = [pytest.mark.anyio, needs_model]


def test_extracted_text_holds_no_nul() -> None:
    assert extract_text(b'{"name": "ferry\\u0000man"}', "a.json", None) == "name: ferryman"


async def test_nul_in_inserted_chunks_and_ingested_files_is_dropped_on_postgresql(tmp_path: Path) -> None:
    async with postgres_store(tmp_path) as migrated:
        # The app opens (and closes) its own store on the fresh schema.
        services = build_services(PostgresStore(POSTGRES_URL, schema=migrated._db._schema), [_Shared()])  # type: ignore[attr-defined]
        async with serving(services) as http:
            db = {"vector_db_id": "nul-db", "embedding_model": "all-MiniLM-L6-v2"}
            assert (await http.post("/v1/vector-dbs", json=db)).status_code == 200
            chunk = {"content": "the ferry\x00man rows", "metadata": {"document_id": "d1"}}
            inserted = await http.post("/v1/vector-io/insert", json={"vector_db_id": "nul-db", "chunks": [chunk]})
            assert inserted.status_code == 200, inserted.text
            found = await http.post("/v1/vector-io/query", json={"vector_db_id": "nul-db", "query": "ferryman"})
            assert [c["content"] for c in found.json()["chunks"]] == ["the ferryman rows"]

            file_id = (await upload(http, "a.json", b'{"who": "the ferry\\u0000man"}'))["id"]
            created = await http.post("/v1/vector_stores", json={"name": "s", "file_ids": [file_id]})
            await settled(services)
            attached = (await http.get(f"/v1/vector_stores/{created.json()['id']}/files/{file_id}")).json()
            assert attached["status"] == "completed", attached
