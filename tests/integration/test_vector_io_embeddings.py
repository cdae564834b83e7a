"""Llama Stack's vector-io with chunks' own embeddings, and the memory_retrieval threshold in real tokens."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from knowledge_serving import _Shared, needs_model

from ferryman.config import KnowledgeSettings
from ferryman.server.app import Services, build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply
from inprocess import check_script, migrated_sqlite, scripted_provider, serving

pytestmark = [pytest.mark.anyio, needs_model]

EMBEDDING = "all-MiniLM-L6-v2"
INLINE_TOKENS = 800


@pytest.fixture
def model(request: pytest.FixtureRequest) -> Iterator[Script]:
    """The chat model's script, checked after the test."""
    script = Script()
    yield script
    check_script(request, script)


@pytest.fixture
async def served(tmp_path: Path, model: Script) -> AsyncIterator[tuple[httpx.AsyncClient, Services]]:
    """Ferryman with the scripted chat model, the local embedding model and a configured inline threshold."""
    services = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "io.db")),
        [scripted_provider(model), _Shared()],
        sole_process=True,
        knowledge=KnowledgeSettings(inline_document_tokens=INLINE_TOKENS),
    )
    async with serving(services) as client:
        yield client, services


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json() if response.content else None


async def _vector_db(http: httpx.AsyncClient) -> str:
    _ok(await http.post("/v1/vector-dbs", json={"vector_db_id": "own", "embedding_model": EMBEDDING}))
    return "own"


async def test_a_chunk_with_its_own_embedding_is_stored_with_it_normalised(
    served: tuple[httpx.AsyncClient, Services],
) -> None:
    http, services = served
    vector_db_id = await _vector_db(http)
    (japan,) = await services.models.embed(EMBEDDING, ["the capital of Japan"])
    scaled = [3.0 * x for x in japan]  # not unit length: stored scaled down
    chunks = [
        {"content": "Apples grow on trees.", "metadata": {"document_id": "apples"}, "embedding": scaled},
        {"content": "Sourdough rises with wild yeast.", "metadata": {"document_id": "bread"}},
    ]
    _ok(await http.post("/v1/vector-io/insert", json={"vector_db_id": vector_db_id, "chunks": chunks}))
    (stored,) = (await services.store.list_chunks(vector_db_id, "apples", None, 10)).items
    vector = np.frombuffer(stored.embedding, dtype="<f4")
    assert np.allclose(vector, np.asarray(japan) / np.linalg.norm(japan), atol=1e-6)
    query = {"vector_db_id": vector_db_id, "query": "the capital of Japan", "params": {"mode": "vector"}}
    found = _ok(await http.post("/v1/vector-io/query", json=query))
    assert found["chunks"][0]["content"] == "Apples grow on trees.", "searched by the embedding it was given"
    assert found["scores"][0] > 0.99
    (bread,) = (await services.store.list_chunks(vector_db_id, "bread", None, 10)).items
    assert len(bread.embedding) == 4 * 384, "a chunk without one is embedded by the store's model"


@pytest.mark.parametrize(("embedding", "message"), [([0.5, 0.5], "2 dimensions"), ([0.0] * 384, "not all zeros")])
async def test_a_chunk_embedding_of_another_dimension_or_zero_is_refused(
    served: tuple[httpx.AsyncClient, Services], embedding: list[float], message: str
) -> None:
    http, services = served
    vector_db_id = await _vector_db(http)
    chunks = [
        {"content": "fine", "metadata": {"document_id": "a"}},
        {"content": "wrong", "metadata": {"document_id": "b"}, "embedding": embedding},
    ]
    answer = await http.post("/v1/vector-io/insert", json={"vector_db_id": vector_db_id, "chunks": chunks})
    assert answer.status_code == 400, answer.text
    assert message in answer.text and "chunks[1].embedding" in answer.text
    assert (await services.store.list_chunks(vector_db_id, "a", None, 10)).items == [], "nothing was stored"


async def _turn_steps(http: httpx.AsyncClient, model: Script, document: str) -> list[str]:
    agent = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}
    agent_id = _ok(await http.post("/v1/agents", json=agent))["agent_id"]
    session_id = _ok(await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "m"}))["session_id"]
    model.enqueue(ScriptedReply(text="Noted."))
    turn = {
        "messages": [{"role": "user", "content": "What does the document say?"}],
        "documents": [{"content": document, "mime_type": "text/plain"}],
        "stream": False,
    }
    done = _ok(await http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=turn))
    return [step["step_type"] for step in done["steps"]]


async def test_documents_go_to_memory_retrieval_by_their_token_count_above_the_configured_threshold(
    served: tuple[httpx.AsyncClient, Services], model: Script
) -> None:
    http, _ = served
    # 1000 one-letter words: 2000 characters, 1000 tokens (a 4-characters-per-token guess says 500)
    dense = "The ferry code is HERON. " + " ".join(["x"] * 1000)
    assert await _turn_steps(http, model, dense) == ["memory_retrieval", "inference"]
    # 150 long words: over 1900 characters, under 800 tokens
    sparse = " ".join(["ferrymen"] * 150) + " " + " ".join(["crossings"] * 90)
    assert await _turn_steps(http, model, sparse) == ["inference"]
    assert "ferrymen" in json.dumps(model.requests[-1]["messages"]), "inlined whole"
