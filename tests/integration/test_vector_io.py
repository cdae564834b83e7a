"""Llama Stack's vector DBs, vector I/O, RAG tool, ``builtin::rag`` and the memory_retrieval step, in process."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from knowledge_serving import _Shared, needs_model

from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply, ScriptedToolCall
from inprocess import check_script, migrated_sqlite, scripted_provider, serving

pytestmark = [pytest.mark.anyio, needs_model]


@pytest.fixture
async def http(tmp_path: Path, model: Script) -> AsyncIterator[httpx.AsyncClient]:
    """Ferryman with the scripted chat model and the local embedding model."""
    services = build_services(
        SqliteStore(migrated_sqlite(tmp_path / "rag.db")), [scripted_provider(model), _Shared()], sole_process=True
    )
    async with serving(services) as client:
        yield client


@pytest.fixture
def model(request: pytest.FixtureRequest) -> Iterator[Script]:
    """The chat model's script, checked after the test."""
    script = Script()
    yield script
    check_script(request, script)


EMBEDDING = "all-MiniLM-L6-v2"
FACTS = {
    "paris": "Paris is the capital of France and sits on the river Seine.",
    "tokyo": "Tokyo is the capital of Japan; its metro carries millions each day.",
    "bread": "Sourdough bread rises thanks to wild yeast and lactic acid bacteria.",
}


def _say(model: Script, text: str) -> None:
    model.enqueue(ScriptedReply(text=text))


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json() if response.content else None


async def _vector_db(http: httpx.AsyncClient, **extra: Any) -> str:
    vector_db_id = f"docs-{uuid.uuid4().hex[:8]}"
    body = {"vector_db_id": vector_db_id, "embedding_model": EMBEDDING, **extra}
    registered = _ok(await http.post("/v1/vector-dbs", json=body))
    assert registered["identifier"] == vector_db_id
    return vector_db_id


async def _insert_facts(http: httpx.AsyncClient, vector_db_id: str) -> None:
    chunks = [{"content": text, "metadata": {"document_id": doc}} for doc, text in FACTS.items()]
    _ok(await http.post("/v1/vector-io/insert", json={"vector_db_id": vector_db_id, "chunks": chunks}))


async def test_register_get_list_and_unregister_a_vector_db(http: httpx.AsyncClient) -> None:
    vector_db_id = await _vector_db(http, provider_id="faiss", provider_vector_db_id="remote-1")
    got = _ok(await http.get(f"/v1/vector-dbs/{vector_db_id}"))
    assert got == {
        "identifier": vector_db_id,
        "provider_id": "faiss",
        "provider_resource_id": "remote-1",
        "type": "vector_db",
        "embedding_model": EMBEDDING,
        "embedding_dimension": 384,
    }
    assert vector_db_id in [db["identifier"] for db in _ok(await http.get("/v1/vector-dbs"))["data"]]
    again = await http.post("/v1/vector-dbs", json={"vector_db_id": vector_db_id, "embedding_model": EMBEDDING})
    assert _ok(again)["identifier"] == vector_db_id, "registering the same vector DB again answers it"
    _ok(await http.delete(f"/v1/vector-dbs/{vector_db_id}"))
    assert (await http.get(f"/v1/vector-dbs/{vector_db_id}")).status_code == 404
    assert (await http.delete(f"/v1/vector-dbs/{vector_db_id}")).status_code == 404


async def test_register_refuses_a_wrong_dimension_or_a_chat_model(http: httpx.AsyncClient) -> None:
    body = {"vector_db_id": "x-dim", "embedding_model": EMBEDDING, "embedding_dimension": 7}
    assert (await http.post("/v1/vector-dbs", json=body)).status_code == 400
    chat = {"vector_db_id": "x-chat", "embedding_model": "scripted-model"}
    assert (await http.post("/v1/vector-dbs", json=chat)).status_code == 400
    assert (await http.get("/v1/vector-dbs/x-dim")).status_code == 404


async def test_inserted_chunks_are_found_by_meaning_with_their_document_ids(http: httpx.AsyncClient) -> None:
    vector_db_id = await _vector_db(http)
    await _insert_facts(http, vector_db_id)
    query = {"vector_db_id": vector_db_id, "query": "Which city is Japan's capital?", "params": {"max_chunks": 2}}
    found = _ok(await http.post("/v1/vector-io/query", json=query))
    assert len(found["chunks"]) == len(found["scores"]) == 2
    assert found["chunks"][0]["metadata"]["document_id"] == "tokyo"
    assert found["chunks"][0]["content"] == FACTS["tokyo"]
    assert found["scores"] == sorted(found["scores"], reverse=True)
    assert all(0.0 <= s <= 1.0 for s in found["scores"])


async def test_query_params_are_checked(http: httpx.AsyncClient) -> None:
    vector_db_id = await _vector_db(http)
    for params in ({"mode": "fuzzy"}, {"max_chunks": "many"}, {"max_chunks": 0}):
        answer = await http.post(
            "/v1/vector-io/query", json={"vector_db_id": vector_db_id, "query": "x", "params": params}
        )
        assert answer.status_code == 400, (params, answer.text)
    keyword = {"vector_db_id": vector_db_id, "query": "x", "params": {"mode": "keyword", "score_threshold": 0.5}}
    assert _ok(await http.post("/v1/vector-io/query", json=keyword)) == {"chunks": [], "scores": []}


async def test_insert_and_query_of_an_unknown_vector_db_are_404(http: httpx.AsyncClient) -> None:
    insert = {"vector_db_id": "nope", "chunks": [{"content": "x", "metadata": {"document_id": "d"}}]}
    assert (await http.post("/v1/vector-io/insert", json=insert)).status_code == 404
    assert (await http.post("/v1/vector-io/query", json={"vector_db_id": "nope", "query": "x"})).status_code == 404
    rag = {"content": "x", "vector_db_ids": ["nope"]}
    assert (await http.post("/v1/tool-runtime/rag-tool/query", json=rag)).status_code == 404


async def test_rag_tool_inserts_documents_and_answers_formatted_context(http: httpx.AsyncClient) -> None:
    vector_db_id = await _vector_db(http)
    documents = [
        {"document_id": "bread-doc", "content": FACTS["bread"], "metadata": {"source": "kitchen"}},
        {
            "document_id": "paris-doc",
            "content": {"uri": "data:text/plain," + FACTS["paris"]},
            "mime_type": "text/plain",
        },
    ]
    body = {"documents": documents, "vector_db_id": vector_db_id, "chunk_size_in_tokens": 128}
    _ok(await http.post("/v1/tool-runtime/rag-tool/insert", json=body))
    query = {
        "content": "What makes sourdough rise?",
        "vector_db_ids": [vector_db_id],
        "query_config": {"max_chunks": 1},
    }
    result = _ok(await http.post("/v1/tool-runtime/rag-tool/query", json=query))
    assert result["metadata"]["document_ids"] == ["bread-doc"]
    assert result["metadata"]["chunks"] == [FACTS["bread"]]
    text = "".join(item["text"] for item in result["content"])
    assert "knowledge_search tool found 1 chunks" in text
    assert f"Result 1\nContent: {FACTS['bread']}" in text and "'source': 'kitchen'" in text
    assert 'the user\'s query: "What makes sourdough rise?"' in text


async def test_rag_query_template_fills_only_its_placeholders(http: httpx.AsyncClient) -> None:
    vector_db_id = await _vector_db(http)
    await _insert_facts(http, vector_db_id)
    config = {"max_chunks": 1, "chunk_template": "#{index} {chunk.content} {chunk.__class__} {metadata}"}
    query = {"content": "sourdough", "vector_db_ids": [vector_db_id], "query_config": config}
    result = _ok(await http.post("/v1/tool-runtime/rag-tool/query", json=query))
    assert f"#1 {FACTS['bread']} {{chunk.__class__}} {{'document_id': 'bread'}}" in result["content"][1]["text"]


async def test_agent_with_builtin_rag_searches_its_bound_vector_db(http: httpx.AsyncClient, model: Script) -> None:
    vector_db_id = await _vector_db(http)
    await _insert_facts(http, vector_db_id)
    toolgroup = {"name": "builtin::rag/knowledge_search", "args": {"vector_db_ids": [vector_db_id]}}
    agent = {"agent_config": {"model": "scripted-model", "instructions": "Use tools.", "toolgroups": [toolgroup]}}
    agent_id = _ok(await http.post("/v1/agents", json=agent))["agent_id"]
    session_id = _ok(await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "rag"}))["session_id"]
    model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="knowledge_search", arguments={"query": "capital of Japan"})])
    )
    _say(model, "Tokyo.")
    turn = {"messages": [{"role": "user", "content": "What is Japan's capital?"}], "stream": False}
    done = _ok(await http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=turn))
    first, second = model.requests
    offered = [t["function"]["name"] for t in first["tools"]]
    assert offered == ["knowledge_search"]
    assert set(first["tools"][0]["function"]["parameters"]["properties"]) == {"query"}, "vector_db_ids is bound"
    tool_step = next(s for s in done["steps"] if s["step_type"] == "tool_execution")
    response = tool_step["tool_responses"][0]
    assert response["metadata"]["document_ids"][0] == "tokyo"
    assert FACTS["tokyo"] in response["metadata"]["chunks"]
    assert FACTS["tokyo"] in json.dumps(second["messages"][-1])


def _big_document() -> str:
    filler = " ".join(f"Line {i} talks about weather patterns over the northern ocean." for i in range(100))
    return f"{filler} The secret launch code of project Heron is AZURE-HARBOR-42. {filler}"


async def test_large_documents_are_retrieved_from_in_a_memory_retrieval_step(
    http: httpx.AsyncClient, model: Script
) -> None:
    agent = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}
    agent_id = _ok(await http.post("/v1/agents", json=agent))["agent_id"]
    session_id = _ok(await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "mem"}))["session_id"]
    _say(model, "AZURE-HARBOR-42.")
    turn = {
        "messages": [{"role": "user", "content": "What is the secret launch code of project Heron?"}],
        "documents": [{"content": _big_document(), "mime_type": "text/plain"}],
        "stream": True,
    }
    async with http.stream("POST", f"/v1/agents/{agent_id}/session/{session_id}/turn", json=turn) as answer:
        events = [json.loads(line[5:]) async for line in answer.aiter_lines() if line.startswith("data:")]
    payloads = [e["event"]["payload"] for e in events]
    memory = [p for p in payloads if p.get("step_type") == "memory_retrieval"]
    assert [p["event_type"] for p in memory] == ["step_start", "step_complete"]
    step = memory[1]["step_details"]
    assert step["vector_db_ids"] == f"vs_session_{session_id}"
    assert "AZURE-HARBOR-42" in step["inserted_context"]
    (request,) = model.requests
    prompt = json.dumps(request["messages"])
    assert "AZURE-HARBOR-42" in prompt, "the retrieved context reached the model"
    assert prompt.count("northern ocean") < 150, "the document was not inlined whole (200 lines)"
    stored = _ok(await http.get(f"/v1/agents/{agent_id}/session/{session_id}"))["turns"][0]["steps"]
    assert [s["step_type"] for s in stored] == ["memory_retrieval", "inference"]
    assert _ok(await http.get(f"/v1/vector_stores/vs_session_{session_id}"))["id"] == f"vs_session_{session_id}"
    _ok(await http.delete(f"/v1/agents/{agent_id}/session/{session_id}"))
    assert (await http.get(f"/v1/vector-dbs/vs_session_{session_id}")).status_code == 404, "deleted with its session"


async def test_small_documents_stay_inline(http: httpx.AsyncClient, model: Script) -> None:
    agent = {"agent_config": {"model": "scripted-model", "instructions": "Be brief."}}
    agent_id = _ok(await http.post("/v1/agents", json=agent))["agent_id"]
    session_id = _ok(await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "inline"}))["session_id"]
    _say(model, "Seine.")
    turn = {
        "messages": [{"role": "user", "content": "Which river?"}],
        "documents": [{"content": FACTS["paris"], "mime_type": "text/plain"}],
        "stream": False,
    }
    done = _ok(await http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=turn))
    assert [s["step_type"] for s in done["steps"]] == ["inference"]
    assert FACTS["paris"] in json.dumps(model.requests[0]["messages"])
    assert (await http.get(f"/v1/vector-dbs/vs_session_{session_id}")).status_code == 404


@pytest.mark.parametrize("body", [{"vector_db_id": "a/b", "embedding_model": EMBEDDING}, {"vector_db_id": "x"}])
async def test_register_validates_its_body(http: httpx.AsyncClient, body: dict[str, Any]) -> None:
    assert (await http.post("/v1/vector-dbs", json=body)).status_code == 400
