"""``llama_stack_client`` 0.2.12's vector DBs, vector I/O, RAG tool and ``builtin::rag`` agents against ferryman."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_stack_client import LlamaStackClient
from llama_stack_client.lib.agents.agent import Agent
from starlette.testclient import TestClient

from ferryman.server.app import build_services, create_app
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedReply, ScriptedToolCall
from inprocess import BASE_URL, Served, check_script, migrated_sqlite, scripted_provider

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from knowledge_serving import _Shared, needs_model  # noqa: E402

pytestmark = needs_model
EMBEDDING = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Ferryman with the scripted chat model and the local embedding model, for this module."""
    script = Script()
    db = migrated_sqlite(tmp_path_factory.mktemp("rag") / "rag.db")
    services = build_services(SqliteStore(db), [scripted_provider(script), _Shared()], sole_process=True)
    with TestClient(create_app(services), base_url=BASE_URL) as http:
        yield Served(http, script, services)


@pytest.fixture()
def client(served: Served, request: pytest.FixtureRequest) -> Iterator[LlamaStackClient]:
    """A client that never retries; the script is checked after the test."""
    served.reset()
    with LlamaStackClient(base_url=BASE_URL, http_client=served.http_client(), max_retries=0) as llama:
        yield llama
    check_script(request, served.script)


def test_vector_dbs_register_list_retrieve_unregister(client: LlamaStackClient) -> None:
    registered = client.vector_dbs.register(vector_db_id="compat-db", embedding_model=EMBEDDING)
    assert registered.identifier == "compat-db" and registered.embedding_dimension == 384
    assert "compat-db" in [db.identifier for db in client.vector_dbs.list()]
    assert client.vector_dbs.retrieve("compat-db").embedding_model == EMBEDDING
    client.vector_dbs.unregister("compat-db")
    assert "compat-db" not in [db.identifier for db in client.vector_dbs.list()]


def test_vector_io_and_rag_tool(client: LlamaStackClient) -> None:
    client.vector_dbs.register(vector_db_id="compat-io", embedding_model=EMBEDDING)
    chunks: list[Any] = [
        {"content": "The Seine flows through Paris.", "metadata": {"document_id": "seine"}},
        {"content": "Mount Fuji is Japan's highest peak.", "metadata": {"document_id": "fuji"}},
    ]
    client.vector_io.insert(vector_db_id="compat-io", chunks=chunks)
    found = client.vector_io.query(vector_db_id="compat-io", query="Which river is in Paris?", params={"max_chunks": 1})
    assert [c.metadata["document_id"] for c in found.chunks] == ["seine"] and len(found.scores) == 1
    document: Any = {"document_id": "bread", "content": "Sourdough rises with wild yeast.", "metadata": {}}
    client.tool_runtime.rag_tool.insert(documents=[document], vector_db_id="compat-io", chunk_size_in_tokens=128)
    result = client.tool_runtime.rag_tool.query(content="What makes sourdough rise?", vector_db_ids=["compat-io"])
    document_ids: Any = result.metadata["document_ids"]
    assert document_ids[0] == "bread"


def test_agent_with_builtin_rag_shows_the_chunks_in_its_tool_step(client: LlamaStackClient, served: Served) -> None:
    client.vector_dbs.register(vector_db_id="compat-agent", embedding_model=EMBEDDING)
    chunk: Any = {"content": "The ferry leaves at nine from pier four.", "metadata": {"document_id": "timetable"}}
    client.vector_io.insert(vector_db_id="compat-agent", chunks=[chunk])
    rag: Any = {"name": "builtin::rag/knowledge_search", "args": {"vector_db_ids": ["compat-agent"]}}
    agent = Agent(client, model="scripted-model", instructions="Use the tools.", tools=[rag])
    session_id = agent.create_session("rag")
    call = ScriptedToolCall(name="knowledge_search", arguments={"query": "ferry departure"})
    served.enqueue(ScriptedReply(tool_calls=[call]), ScriptedReply(text="At nine."))
    question: Any = {"role": "user", "content": "When?"}
    chunks: list[Any] = list(agent.create_turn(messages=[question], session_id=session_id))
    turn = chunks[-1].event.payload.turn
    tool_step = next(step for step in turn.steps if step.step_type == "tool_execution")
    response = tool_step.tool_responses[0]
    assert response.metadata["document_ids"] == ["timetable"]
    assert "pier four" in str(response.content)
    assert turn.output_message.content == "At nine."
