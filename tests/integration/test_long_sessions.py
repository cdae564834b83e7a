"""A session never fails for its length: a thousand turns against a model of 512 tokens, on both APIs.

The scripted model holds each prompt to its context (``ScriptedModel``'s ``context_length``): a prompt that
ferryman sent over it fails the test (``script.overflows``), and it refuses it as a model server would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedModel, ScriptedReply
from inprocess import agent_and_session, check_script, migrated_sqlite, serving

pytestmark = pytest.mark.anyio

CONTEXT = 512
TURNS = 1000
COMPACTED_TURNS = 60
"""Compaction asks the model for a summary now and then: fewer turns show it as well."""
SAID = "The ferry to the island leaves at seven and is back by noon, weather permitting. "
"""About 14 tokens by the estimate: a prompt holds a few dozen such turns, far fewer than a thousand."""


@pytest.fixture()
def model(request: pytest.FixtureRequest) -> Iterator[ScriptedModel]:
    scripted = ScriptedModel(script=Script(default_reply=ScriptedReply(text=SAID)), context_length=CONTEXT)
    yield scripted
    check_script(request, scripted.script)


@pytest.fixture()
async def http(tmp_path: Path, model: ScriptedModel) -> AsyncIterator[httpx.AsyncClient]:
    services = build_services(SqliteStore(migrated_sqlite(tmp_path / "long.db")), [model], sole_process=True)
    async with serving(services) as client:
        yield client


@pytest.mark.parametrize(("strategy", "turns"), [("truncation", TURNS), ("compaction", COMPACTED_TURNS)])
async def test_a_thousand_turns_of_one_agent_session_on_a_512_token_model(
    http: httpx.AsyncClient, model: ScriptedModel, strategy: str, turns: int
) -> None:
    config = {"model": "scripted-model", "instructions": "Be brief.", "context_management": {"strategy": strategy}}
    agent_id = (await http.post("/v1/agents", json={"agent_config": config})).json()["agent_id"]
    session_id = (await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "long"})).json()["session_id"]
    notes = []
    for number in range(turns):
        body = {"messages": [{"role": "user", "content": f"{number}: {SAID}"}], "stream": False}
        answered = await http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body)
        assert answered.status_code == 200, answered.text
        turn = answered.json()
        assert turn["status"] == "completed", turn
        notes.append(turn["steps"][-1].get("context_management"))
    assert model.script.overflows == [] and model.refused == []
    assert notes[0] is None  # the first turns fit whole
    noted = [note for note in notes if note is not None]
    assert {note["strategy"] for note in noted} == {strategy}
    assert all(note["context_length"] == CONTEXT and note["prompt_tokens"] <= CONTEXT - 64 for note in noted)
    if strategy == "truncation":
        assert notes[-1] is not None and notes[-1]["dropped_messages"] > 1900
    else:  # a summary stands for the oldest turns, and later turns start from it until it is made again
        assert 1 < len(noted) < turns / 4 and all(note["summarized_messages"] > 0 for note in noted)
    last_prompt = model.requests[-1]["messages"]
    assert last_prompt[-1]["content"] == f"{turns - 1}: {SAID}"


@pytest.mark.parametrize(
    ("management", "turns"),
    [({"truncation": "auto"}, TURNS), ({"context_management": [{"type": "compaction"}]}, COMPACTED_TURNS)],
)
async def test_a_thousand_responses_of_one_chain_on_a_512_token_model(
    http: httpx.AsyncClient, model: ScriptedModel, management: dict[str, object], turns: int
) -> None:
    previous = None
    for number in range(turns):
        body = {"model": "scripted-model", "input": f"{number}: {SAID}", **management}
        if previous is not None:
            body["previous_response_id"] = previous
        answered = await http.post("/v1/responses", json=body)
        assert answered.status_code == 200, answered.text
        assert answered.json()["status"] == "completed", answered.text
        previous = answered.json()["id"]
    assert model.script.overflows == [] and model.refused == []
    last = model.requests[-1]["messages"][-1]["content"]
    assert [part["text"] for part in last] == [f"{turns - 1}: {SAID}"]
    assert len(model.requests[-1]["messages"]) < 2 * 40  # a window of the newest turns, not the thousand


async def test_a_response_over_the_context_without_truncation_is_refused_before_inference(
    http: httpx.AsyncClient, model: ScriptedModel
) -> None:
    previous = None
    for number in range(40):
        body = {"model": "scripted-model", "input": f"{number}: {SAID}", "truncation": "auto"}
        if previous is not None:
            body["previous_response_id"] = previous
        previous = (await http.post("/v1/responses", json=body)).json()["id"]
    asked = len(model.requests)
    refused = await http.post(
        "/v1/responses", json={"model": "scripted-model", "input": "and then?", "previous_response_id": previous}
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "context_length_exceeded"
    assert "context" in refused.json()["error"]["message"]
    assert len(model.requests) == asked


async def test_a_model_server_that_counts_more_than_ferryman_gets_a_shorter_prompt_not_a_failed_turn(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Its tokenizer counts half as much again as ferryman's estimate: prompts ferryman fits, it refuses.
    strict = ScriptedModel(
        script=Script(default_reply=ScriptedReply(text=SAID)), context_length=CONTEXT, token_ratio=1.5
    )
    services = build_services(SqliteStore(migrated_sqlite(tmp_path / "strict.db")), [strict], sole_process=True)
    async with serving(services) as http:
        agent_id, session_id = await agent_and_session(http)
        for number in range(40):
            body = {"messages": [{"role": "user", "content": f"{number}: {SAID}"}], "stream": False}
            turn = (await http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body)).json()
            assert turn["status"] == "completed", turn
    check_script(request, strict.script)
    assert strict.refused  # it did refuse, and each refused prompt was fitted shorter and sent again
    assert len(strict.requests) == 40
