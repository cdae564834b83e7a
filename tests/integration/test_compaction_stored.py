"""A compaction is stored in place of what it replaced, whichever inference of a turn it came before: a later
turn of an agent session, a ``previous_response_id`` chain read from the store (on a replica whose history
cache does not hold it), and ``POST /v1/responses/compact`` of that chain start from its summary, and read none
of what it replaced."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from knowledge_serving import _Shared, needs_model

from ferryman.server.app import Services, build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from inprocess import check_script, migrated_sqlite, serving

pytestmark = pytest.mark.anyio

MODEL = "scripted-model"
COMPACTION = [{"type": "compaction", "compact_threshold": 150}]
"""Tokens (about six characters each): the first exchange fits, the second question takes the prompt past it."""
FIRST = "My name is Ada and I keep the ferries. " + "Tides and timetables. " * 25
ANSWER = "Noted, Ada. " + "The ferries run on time. " * 20
SUMMARY = "The user is Ada, who keeps the ferries."
WEATHER = {
    "name": "get_weather",
    "description": "Weather",
    "parameters": [{"name": "city", "parameter_type": "string", "description": "City", "required": True}],
}


@pytest.fixture()
async def served(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[httpx.AsyncClient, ScriptedModel, Services]]:
    """The app over SQLite, whose model publishes a 4000-token context (and the local embedding model); its
    services."""
    model = ScriptedModel(model_ids=(MODEL,), context_length=4000)
    store = SqliteStore(migrated_sqlite(tmp_path / "stored.db"))
    services = build_services(store, [model, _Shared()], sole_process=True)
    async with serving(services) as http:
        yield http, model, services
    check_script(request, model.script)


async def _create(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    answer = await http.post("/v1/responses", json={"model": MODEL, **body})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


@pytest.mark.parametrize("given", ["whole", "chained"])
async def test_a_chained_response_reads_the_compacted_history_on_a_replica_without_the_cache(
    served: tuple[httpx.AsyncClient, ScriptedModel, Services], given: str
) -> None:
    """Given whole (what it compacted was its own input) or chained (an earlier response's), what a response's
    compaction replaced is never read again by the chain, nor summarized again by ``compact``."""
    http, model, services = served
    model.enqueue_text(ANSWER)
    first = await _create(http, input=FIRST, context_management=COMPACTION)
    model.enqueue_text(SUMMARY)
    model.enqueue_text("You are Ada.")
    if given == "whole":
        whole = [_user(FIRST), *first["output"], _user("What is my name?")]
        second = await _create(http, input=whole, context_management=COMPACTION)
    else:
        chained = {"previous_response_id": first["id"]}
        second = await _create(http, input="What is my name?", context_management=COMPACTION, **chained)
    assert [item["type"] for item in second["output"]] == ["compaction", "message"]

    services.responses.forget(None)  # as on a replica that did not run it
    model.enqueue_text("The ferries.")
    await _create(http, input="And what do I keep?", previous_response_id=second["id"])
    read = str(model.requests[-1]["messages"])
    assert SUMMARY in read and "What is my name?" in read and "Tides" not in read

    services.responses.forget(None)
    model.enqueue_text("Ada asked her name.")
    body = {"model": MODEL, "previous_response_id": second["id"]}
    compacted = await http.post("/v1/responses/compact", json=body)
    assert compacted.status_code == 200, compacted.text
    summarizing = str(model.requests[-1]["messages"])
    assert SUMMARY in summarizing and "Tides" not in summarizing and "Tides" not in compacted.text


async def _agent_session(http: httpx.AsyncClient, **config: Any) -> str:
    """The path of a new session of an agent that compacts past 150 tokens."""
    compacting = {"strategy": "compaction", "compact_threshold": 150}
    body = {"model": MODEL, "instructions": "Be brief.", "context_management": compacting, **config}
    agent_id = (await http.post("/v1/agents", json={"agent_config": body})).json()["agent_id"]
    session = f"/v1/agents/{agent_id}/session"
    session_id = (await http.post(session, json={"session_name": "s"})).json()["session_id"]
    return f"{session}/{session_id}"


async def _turn(http: httpx.AsyncClient, session: str, text: str, **body: Any) -> dict[str, Any]:
    sent = {"messages": [{"role": "user", "content": text}], "stream": False, **body}
    answered = await http.post(f"{session}/turn", json=sent)
    assert answered.status_code == 200, answered.text
    return dict(answered.json())


async def test_an_agent_turn_compacted_before_a_later_inference_starts_the_next_turn_from_its_summary(
    served: tuple[httpx.AsyncClient, ScriptedModel, Services],
) -> None:
    """A tool result takes the prompt past the threshold after the turn's first inference: the summary made
    then stands in the session's stored history, so that the next turn reads it, and is not summarized again."""
    http, model, _ = served
    session = await _agent_session(http, client_tools=[WEATHER])

    async def turn(text: str) -> dict[str, Any]:
        return await _turn(http, session, text)

    model.enqueue_text("Noted, Ada.")
    assert (await turn("My name is Ada. " + "Tides and timetables. " * 18))["status"] == "completed"
    model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", arguments={"city": "Oslo"})]))
    paused = await turn("What is the weather?")
    assert paused["status"] == "awaiting_input", paused
    call = paused["output_message"]["tool_calls"][0]
    model.enqueue_text(SUMMARY)
    model.enqueue_text("It is sunny.")
    result = {"call_id": call["call_id"], "tool_name": "get_weather", "content": "Sunny and mild. " * 16}
    resumed = await http.post(
        f"{session}/turn/{paused['turn_id']}/resume", json={"tool_responses": [result], "stream": False}
    )
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["steps"][-1]["context_management"]["strategy"] == "compaction"
    asked = len(model.requests)

    model.enqueue_text("You are welcome.")
    assert (await turn("Thanks."))["status"] == "completed"
    (read,) = model.requests[asked:]  # no summary made again
    said = str(read["messages"])
    assert SUMMARY in said and "Sunny and mild." in said and "Tides" not in said


@needs_model
async def test_an_agent_turn_compacted_after_a_memory_retrieval_stores_its_user_message_without_the_context(
    served: tuple[httpx.AsyncClient, ScriptedModel, Services],
) -> None:
    """The context a memory_retrieval step put in the user message takes the prompt past the threshold: the
    summary is stored for the next turn, and the user message beside it as it was sent (the retrieved context is
    the turn's, never the session history's)."""
    http, model, _ = served
    session = await _agent_session(http)
    model.enqueue_text("Noted, Ada.")
    assert (await _turn(http, session, "My name is Ada. " + "Tides and timetables. " * 12))["status"] == "completed"
    filler = " ".join(f"Line {i} talks about weather patterns over the northern ocean." for i in range(100))
    document = {"content": f"{filler} The launch code of project Heron is AZURE-HARBOR-42. {filler}"}
    model.enqueue_text(SUMMARY)
    model.enqueue_text("Found it.")
    retrieved = await _turn(
        http, session, "What is the launch code?", documents=[{**document, "mime_type": "text/plain"}]
    )
    assert [step["step_type"] for step in retrieved["steps"]] == ["memory_retrieval", "inference"]
    assert retrieved["steps"][-1]["context_management"]["strategy"] == "compaction"
    assert "northern ocean" in str(model.requests[-1]["messages"])  # the model read the context
    asked = len(model.requests)

    model.enqueue_text("You are welcome.")
    assert (await _turn(http, session, "Thanks."))["status"] == "completed"
    (read,) = model.requests[asked:]  # no summary made again
    said = str(read["messages"])
    assert SUMMARY in said and "What is the launch code?" in said
    assert "Tides" not in said and "northern ocean" not in said


async def test_a_summary_too_long_to_fit_replaces_nothing_in_the_stored_history(
    served: tuple[httpx.AsyncClient, ScriptedModel, Services],
) -> None:
    """The third turn passes the threshold; its summary of the first exchange is longer than the whole context,
    so truncation drops it again: the model reads the second exchange on, and the stored history is left as it
    was (before, the fitted history took the turn's place: the second exchange stored twice)."""
    http, model, services = served
    session = await _agent_session(http)
    session_id = session.rsplit("/", 1)[-1]
    first, second = "My name is Ada. " + "Tides. " * 40, "I keep the ferries."
    model.enqueue_text("Noted, Ada. " + "Timetables. " * 20)
    assert (await _turn(http, session, first))["status"] == "completed"
    model.enqueue_text("Noted. " + "Ferries run on time. " * 18)
    assert (await _turn(http, session, second))["status"] == "completed"
    model.enqueue_text("Ada keeps the ferries. " * 1200)  # the summary: past the 4000-token context alone
    model.enqueue_text("You are Ada.")
    third = await _turn(http, session, "What is my name?")
    assert third["status"] == "completed"
    assert third["steps"][-1]["context_management"]["strategy"] == "compaction"
    read = str(model.requests[-1]["messages"])
    assert "Ada keeps the ferries." not in read and second in read and "Tides." not in read

    stored = await services.store.load_history(session_id, "turn_next")  # what a next turn would read
    said = [str(message.content) for message in stored if message.role == "user"]
    assert said == [first, second, "What is my name?"], "each turn's messages once, none lost"
