"""Llama Stack inserts into one document, and how many documents one RAG insert may carry."""

from __future__ import annotations

from pathlib import Path

import pytest
from knowledge_serving import _Shared, needs_model

from ferryman.api.limits import MAX_DOCUMENTS
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script
from inprocess import migrated_sqlite, scripted_provider, serving

pytestmark = [pytest.mark.anyio, needs_model]


async def test_a_later_insert_into_a_document_continues_its_chunk_order(tmp_path: Path) -> None:
    services = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "io.db")), [scripted_provider(Script()), _Shared()], sole_process=True
    )
    async with serving(services) as http:
        body = {"vector_db_id": "notes", "embedding_model": "all-MiniLM-L6-v2"}
        assert (await http.post("/v1/vector-dbs", json=body)).status_code == 200
        for batch in (["one", "two"], ["three", "four"]):
            chunks = [{"content": text, "metadata": {"document_id": "diary"}} for text in batch]
            inserted = await http.post("/v1/vector-io/insert", json={"vector_db_id": "notes", "chunks": chunks})
            assert inserted.status_code == 200, inserted.text
        page = await services.store.list_chunks("notes", "diary", None, 10)
    assert [(c.position, c.text) for c in page.items] == [(0, "one"), (1, "two"), (2, "three"), (3, "four")]


async def test_a_rag_insert_of_too_many_documents_is_refused(tmp_path: Path) -> None:
    services = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "rag.db")), [scripted_provider(Script()), _Shared()], sole_process=True
    )
    async with serving(services) as http:
        body = {"vector_db_id": "many", "embedding_model": "all-MiniLM-L6-v2"}
        assert (await http.post("/v1/vector-dbs", json=body)).status_code == 200
        documents = [{"document_id": f"d{i}", "content": "text"} for i in range(MAX_DOCUMENTS + 1)]
        insert = {"vector_db_id": "many", "documents": documents, "chunk_size_in_tokens": 128}
        refused = await http.post("/v1/tool-runtime/rag-tool/insert", json=insert)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["field"] == "documents" and f"at most {MAX_DOCUMENTS} items" in error["message"]
