"""A search query holds at most 4 KB whichever way it reaches a search, and what vector-io stores as an id is one.

The request models bound the queries of the search routes; a tool's arguments
(``/v1/tool-runtime/invoke``, a model's call) reach the search service without
them, where a 2 MB query cost seconds of tokenizing, embedding and matching. A
turn's own retrieval searches with the start of the user's message instead.
A chunk's ``metadata.document_id`` is stored as the chunk's source, an id:
with a NUL it was a 500 on PostgreSQL.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from knowledge_serving import _Shared, needs_model
from storage_backends import POSTGRES_URL, postgres_store

from ferryman.api.limits import MAX_SEARCH_QUERY_CHARS
from ferryman.config import KnowledgeSettings
from ferryman.server.app import build_services
from ferryman.storage.base import Store
from ferryman.storage.sql.postgres import PostgresStore
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedModel, ScriptedReply
from inprocess import check_script, migrated_sqlite, scripted_provider, serving

pytestmark = pytest.mark.anyio

LONG = MAX_SEARCH_QUERY_CHARS + 1


@pytest.fixture
def model(request: pytest.FixtureRequest) -> Iterator[Script]:
    """The chat model's script, checked after the test."""
    script = Script()
    yield script
    check_script(request, script)


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    services = build_services(SqliteStore(migrated_sqlite(tmp_path / "search.db")), [ScriptedModel()])
    async with serving(services) as client:
        yield client


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_tool_invocation_with_a_long_search_query_is_refused_at_once(http: httpx.AsyncClient) -> None:
    arguments = {"query": "q" * (2 * 1024 * 1024), "vector_db_ids": ["db1"]}
    started = time.monotonic()
    invoked = _ok(
        await http.post("/v1/tool-runtime/invoke", json={"tool_name": "knowledge_search", "kwargs": arguments})
    )
    assert time.monotonic() - started < 2
    assert invoked["error_message"] == f"a search query holds at most {MAX_SEARCH_QUERY_CHARS} characters (got 2097152)"
    # Within the limit, the search runs: the vector DB is unknown.
    within = {**arguments, "query": "q" * MAX_SEARCH_QUERY_CHARS}
    found = _ok(await http.post("/v1/tool-runtime/invoke", json={"tool_name": "knowledge_search", "kwargs": within}))
    assert "not found" in found["error_message"]


@needs_model
async def test_a_turn_retrieving_from_its_documents_searches_with_the_start_of_a_long_message(
    tmp_path: Path, model: Script
) -> None:
    services = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "memory.db")),
        [scripted_provider(model), _Shared()],
        sole_process=True,
        knowledge=KnowledgeSettings(inline_document_tokens=100),
    )
    async with serving(services) as http:
        agent = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}
        agent_id = _ok(await http.post("/v1/agents", json=agent))["agent_id"]
        session_id = _ok(await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "m"}))["session_id"]
        model.enqueue(ScriptedReply(text="Noted."))
        document = "The ferry code is HERON. " + " ".join(["x"] * 1000)
        turn = {
            "messages": [{"role": "user", "content": "What is the ferry code? " + "please " * (LONG // 7)}],
            "documents": [{"content": document, "mime_type": "text/plain"}],
        }
        done = _ok(await http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=turn))
        assert [step["step_type"] for step in done["steps"]] == ["memory_retrieval", "inference"]
        assert "HERON" in str(done["steps"][0]["inserted_context"])
        assert done["output_message"]["content"] == "Noted."


@asynccontextmanager
async def _store(backend: str, tmp_path: Path) -> AsyncIterator[Store]:
    """A store the app opens itself, on a fresh database of ``backend``."""
    if backend == "sqlite":
        yield SqliteStore(migrated_sqlite(tmp_path / "chunks.db"))
    else:
        async with postgres_store(tmp_path) as migrated:
            yield PostgresStore(POSTGRES_URL, schema=migrated._db._schema)  # type: ignore[attr-defined]


@needs_model
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_chunk_document_id_that_is_no_id_is_refused(tmp_path: Path, backend: str) -> None:
    async with _store(backend, tmp_path) as store, serving(build_services(store, [_Shared()])) as http:
        _ok(await http.post("/v1/vector-dbs", json={"vector_db_id": "db1", "embedding_model": "all-MiniLM-L6-v2"}))
        for document_id in ("d\x00", "d\x1f", "d\x85", "d" * 257):
            chunks = [{"content": "fine", "metadata": {"document_id": "a"}},
                      {"content": "hello", "metadata": {"document_id": document_id}}]  # fmt: skip
            answer = await http.post("/v1/vector-io/insert", json={"vector_db_id": "db1", "chunks": chunks})
            assert answer.status_code == 400, answer.text
            error = answer.json()["error"]
            assert error["field"] == "chunks[1].metadata.document_id"
            assert "at most 256 characters long, without control characters" in error["message"]
        query = {"vector_db_id": "db1", "query": "hello"}
        assert _ok(await http.post("/v1/vector-io/query", json=query))["chunks"] == [], "nothing was stored"
        chunk = {"content": "hello", "metadata": {"document_id": "d" * 256}}
        inserted = await http.post("/v1/vector-io/insert", json={"vector_db_id": "db1", "chunks": [chunk]})
        assert inserted.status_code == 200, inserted.text


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_tool_invocation_naming_a_store_id_that_is_no_id_is_an_error_result(
    tmp_path: Path, backend: str
) -> None:
    # The ids come in the tool's arguments, which no request model checks (a NUL: a 500 on PostgreSQL).
    async with _store(backend, tmp_path) as store, serving(build_services(store, [ScriptedModel()])) as http:
        for vector_db_id in ("db\x00", "db\x7f", "d" * 257):
            arguments = {"query": "ferry", "vector_db_ids": ["fine", vector_db_id]}
            body = {"tool_name": "knowledge_search", "kwargs": arguments}
            invoked = _ok(await http.post("/v1/tool-runtime/invoke", json=body))
            assert invoked["error_message"] == "a vector store id holds at most 256 characters, no control character"
