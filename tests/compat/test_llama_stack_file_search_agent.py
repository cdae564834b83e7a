"""``llama-stack-client==0.7.5``'s responses-backed ``Agent`` with a server-side ``file_search`` tool.

The search shows as a ``tool_execution`` step marked ``metadata.server_side``
between two inference steps. The vector store is a Llama Stack vector DB
(registered and filled over HTTP, with given embeddings; the tool searches by
keyword); the client runs in its own venv (see ``test_llama_stack_responses_agent.py``).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
from test_llama_stack_responses_agent import MODEL, RUN_TIMEOUT, client_python, shape

from ferryman.testing import ScriptedReply, ScriptedServerClient, ScriptedToolCall

SCRIPT = Path(__file__).with_name("llama_stack_file_search_script.py")
TIMETABLE = "The first ferry leaves the harbour at nine in the morning."
DIMENSION = 384

__all__ = ["client_python"]


def _vector_db(base_url: str) -> str:
    """A vector DB holding one chunk, with a given embedding (no model runs)."""
    db_id = f"ferries-{uuid.uuid4().hex[:8]}"
    embedding = [1.0] + [0.0] * (DIMENSION - 1)
    chunk = {"content": TIMETABLE, "metadata": {"document_id": "timetable.txt"}, "embedding": embedding}
    with httpx.Client(base_url=base_url, timeout=30) as http:
        registered = http.post("/v1/vector-dbs", json={"vector_db_id": db_id, "embedding_model": "all-MiniLM-L6-v2"})
        assert registered.status_code == 200, registered.text
        inserted = http.post("/v1/vector-io/insert", json={"vector_db_id": db_id, "chunks": [chunk]})
        assert inserted.status_code in (200, 204), inserted.text
    return db_id


def _run(python: Path, base_url: str, vector_store_id: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), str(SCRIPT), base_url, MODEL, vector_store_id],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_agent_turn_shows_the_search_as_a_server_side_tool_step(
    client_python: Path, served_base_url: str, served_model: ScriptedServerClient
) -> None:
    db_id = _vector_db(served_base_url)
    served_model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="file_search", arguments={"query": "first ferry"})]),
        ScriptedReply(text="At nine [1]."),
    )

    seen = _run(client_python, served_base_url, db_id)

    events = seen["events"]
    steps = shape(events)
    tool_started = next(e for e in events if e["class"] == "StepStarted" and e["step_type"] == "tool_execution")
    assert tool_started["metadata"]["server_side"] is True
    assert tool_started["metadata"]["tool_type"] == "file_search"
    assert steps.index("StepStarted(inference)") < steps.index("StepStarted(tool_execution)")
    last_inference = max(i for i, step in enumerate(steps) if step == "StepStarted(inference)")
    assert steps.index("StepCompleted(tool_execution)") < last_inference
    assert events[-1]["class"] == "TurnCompleted" and events[-1]["final_text"] == "At nine [1]."
    assert seen["schema_errors"] == []
    tool_output = served_model.requests()[1]["messages"][-1]
    assert tool_output["role"] == "tool" and TIMETABLE in tool_output["content"]
