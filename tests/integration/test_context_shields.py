"""Truncation and compaction never bring back what an input shield blocked, on both APIs.

The first turn (or response) sends an e-mail address that the local shield blocks; the server keeps the
blocked text for review (``keep_blocked_text``), so it does lie in the store, in the shield step's metadata.
Then the session goes on past its 512-token context until each strategy has acted: truncation has dropped
the blocked turn, compaction has summarized it. No call the scripted model got (answers and summaries alike,
and ``POST /v1/responses/compact``'s) may carry the address; the summary that covered the blocked turn read
its placeholder instead.

A ``compaction`` item (a response's, or ``POST /v1/responses/compact``'s) given back in an input seals text the
model reads: an input shield that blocks that input leaves no item that opens to it, and one that redacts it
leaves the item sealed again over the redacted text.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from storage_backends import unopened_store

from ferryman.engine.summary import INSTRUCTIONS
from ferryman.safety_settings import SafetySettings
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import Script, ScriptedModel, ScriptedReply
from ferryman.withheld import WITHHELD_TEXT
from inprocess import check_script, migrated_sqlite, serving

pytestmark = pytest.mark.anyio

CONTEXT = 512
SECRET = "alice@example.com"
BLOCKED = f"mail {SECRET} the timetable"
SAID = "The ferry to the island leaves at seven and is back by noon, weather permitting. "
TURNS = 32
"""Enough turns of :data:`SAID` past the blocked one for compaction to summarize twice (about 16 fit)."""


@asynccontextmanager
async def _served(backend: str, tmp_path: Path, model: ScriptedModel) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """The app over ``backend``, keeping blocked text for review, with a blocking local shield; its id."""
    async with unopened_store(backend, tmp_path) as store:
        services = build_services(store, [model], safety_settings=SafetySettings(keep_blocked_text=True))
        async with serving(services) as http:
            shield_id = f"local-{uuid.uuid4().hex[:8]}"
            body = {"shield_id": shield_id, "provider_id": "ferryman-local", "params": {"action": "block"}}
            assert (await http.post("/v1/shields", json=body)).status_code == 200
            yield http, shield_id


@pytest.fixture()
def model(request: pytest.FixtureRequest) -> Iterator[ScriptedModel]:
    scripted = ScriptedModel(script=Script(default_reply=ScriptedReply(text=SAID)), context_length=CONTEXT)
    yield scripted
    check_script(request, scripted.script)


def _summaries(model: ScriptedModel, besides: int | None) -> list[str]:
    """The transcripts compaction asked the model to summarize (but the request numbered ``besides``)."""
    return [
        r["messages"][-1]["content"]
        for number, r in enumerate(model.requests)
        if r["messages"][0]["content"] == INSTRUCTIONS and number != besides
    ]


def _never_sent(model: ScriptedModel, strategy: str, besides: int | None = None) -> None:
    """No call carried the blocked text, and the strategy did act on the blocked turn."""
    assert model.script.overflows == []
    assert not [r for r in model.requests if SECRET in json.dumps(r["messages"])]
    assert WITHHELD_TEXT in json.dumps(model.requests[0]["messages"])  # the blocked turn was in the history
    assert WITHHELD_TEXT not in json.dumps(model.requests[-1]["messages"])  # and it is gone from the prompt now
    summaries = _summaries(model, besides)
    if strategy == "compaction":  # it was summarized: as its placeholder
        assert len(summaries) >= 2 and WITHHELD_TEXT in summaries[0]
    else:
        assert summaries == []


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
@pytest.mark.parametrize("strategy", ["truncation", "compaction"])
async def test_an_agent_session_past_its_context_never_brings_back_a_blocked_input(
    tmp_path: Path, model: ScriptedModel, backend: str, strategy: str
) -> None:
    async with _served(backend, tmp_path, model) as (http, shield_id):
        config = {
            "model": "scripted-model",
            "instructions": "Be brief.",
            "input_shields": [shield_id],
            "context_management": {"strategy": strategy},
        }
        agent_id = (await http.post("/v1/agents", json={"agent_config": config})).json()["agent_id"]
        session = f"/v1/agents/{agent_id}/session"
        session += "/" + (await http.post(session, json={"session_name": "s"})).json()["session_id"]
        notes = []
        for text in [BLOCKED, *(f"{number}: {SAID}" for number in range(TURNS))]:
            body = {"messages": [{"role": "user", "content": text}], "stream": False}
            turn = (await http.post(f"{session}/turn", json=body)).json()
            assert turn["status"] == "completed", turn
            notes.append(turn["steps"][-1].get("context_management"))
        assert model.requests and not any(SECRET in json.dumps(r) for r in model.requests)
        assert {note["strategy"] for note in notes if note is not None} == {strategy}
        _never_sent(model, strategy)
        # The blocked text is in the store for review: that is what the strategies must not read.
        blocked = (await http.get(f"{session}/turn/{turn['turn_id']}")).json()
        assert SECRET not in json.dumps(blocked)


def _output_text(response: dict[str, Any]) -> str:
    return "".join(part.get("text", part.get("refusal", "")) for part in response["output"][0]["content"])


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
@pytest.mark.parametrize("strategy", ["truncation", "compaction"])
async def test_a_response_chain_past_its_context_never_brings_back_a_blocked_input(
    tmp_path: Path, model: ScriptedModel, backend: str, strategy: str
) -> None:
    management: dict[str, Any] = (
        {"truncation": "auto"} if strategy == "truncation" else {"context_management": [{"type": "compaction"}]}
    )
    async with _served(backend, tmp_path, model) as (http, shield_id):
        previous, early = None, None
        for text in [BLOCKED, *(f"{number}: {SAID}" for number in range(TURNS))]:
            body = {"model": "scripted-model", "input": text, "guardrails": [shield_id], **management}
            if previous is not None:
                body["previous_response_id"] = previous
            answered = await http.post("/v1/responses", json=body)
            assert answered.status_code == 200, answered.text
            assert answered.json()["status"] == "completed", answered.text
            if previous is None:
                assert _output_text(answered.json()) != SAID  # the shield refused the first
            previous = answered.json()["id"]
            if text.startswith("1: "):
                early = await _compact(http, model, previous, early=True, replaced=False)
        _never_sent(model, strategy, besides=early)
        assert previous is not None
        await _compact(http, model, previous, early=False, replaced=strategy == "compaction")


async def _compact(http: httpx.AsyncClient, model: ScriptedModel, previous: str, early: bool, replaced: bool) -> int:
    """``POST /v1/responses/compact`` of the chain: its summary request and its answer hold no blocked text.

    Early in the chain, the summary request reads the blocked turn's placeholder (later, what fits of the
    chain is its newest part); the user messages the answer keeps hold the placeholder, unless a response's
    ``compaction`` item has ``replaced`` the blocked turn.
    """
    asked = len(model.requests)
    compacted = await http.post(
        "/v1/responses/compact", json={"model": "scripted-model", "previous_response_id": previous}
    )
    assert compacted.status_code == 200, compacted.text
    [summarizing] = model.requests[asked:]
    assert summarizing["messages"][0]["content"] == INSTRUCTIONS
    assert SECRET not in json.dumps(summarizing) and SECRET not in compacted.text
    assert (WITHHELD_TEXT in compacted.text) is not replaced
    assert (WITHHELD_TEXT in summarizing["messages"][-1]["content"]) is early
    return asked


FERRIES = "My name is Ada and I keep the ferries. " + "Tides and timetables. " * 25
ANSWER = "Noted, Ada. " + "The ferries run on time. " * 20
MAILED = f"What is my name? Mail it to {SECRET}."
COMPACTING = [{"type": "compaction", "compact_threshold": 150}]
"""Tokens: the first exchange fits under it, a second question takes the prompt past it."""


@pytest.fixture()
async def sealing(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[httpx.AsyncClient, ScriptedModel]]:
    """The app over SQLite, with a model of 4000 tokens and a local shield of each action on e-mail addresses."""
    model = ScriptedModel(model_ids=("scripted-model",), context_length=4000)
    services = build_services(SqliteStore(migrated_sqlite(tmp_path / "sealed.db")), [model], sole_process=True)
    async with serving(services) as http:
        for action in ("block", "redact"):
            body = {"shield_id": f"mail-{action}", "provider_id": "ferryman-local", "params": {"action": action}}
            assert (await http.post("/v1/shields", json=body)).status_code == 200
        yield http, model
    check_script(request, model.script)


async def _respond(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    answer = await http.post("/v1/responses", json={"model": "scripted-model", **body})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def _sealed_secret(http: httpx.AsyncClient, model: ScriptedModel, kind: str) -> dict[str, Any]:
    """A ``compaction`` item that opens to :data:`SECRET`: a response's (its history), or a ``compact`` call's
    (its summary)."""
    if kind == "compact":
        model.enqueue_text(f"Ada asked her name be mailed to {SECRET}.")
        compacted = await http.post("/v1/responses/compact", json={"model": "scripted-model", "input": MAILED})
        assert compacted.status_code == 200, compacted.text
        item = dict(compacted.json()["output"][-1])
    else:
        model.enqueue_text(ANSWER)
        first = await _respond(http, input=FERRIES, context_management=COMPACTING)
        model.enqueue_text("The user is Ada.")  # the summary
        model.enqueue_text("You are Ada.")
        second = await _respond(http, input=MAILED, previous_response_id=first["id"], context_management=COMPACTING)
        item = second["output"][0]
    assert item["type"] == "compaction" and SECRET not in json.dumps(item)
    return item


@pytest.mark.parametrize("kind", ["response", "compact"])
async def test_a_blocked_input_compaction_item_is_never_replayed_to_the_model(
    sealing: tuple[httpx.AsyncClient, ScriptedModel], kind: str
) -> None:
    http, model = sealing
    item = await _sealed_secret(http, model, kind)
    conversation = (await http.post("/v1/conversations", json={})).json()["id"]
    given = [item, {"type": "message", "role": "user", "content": "hello"}]
    blocked = await _respond(http, input=given, conversation=conversation, guardrails=["mail-block"])
    assert blocked["output"][0]["content"][0]["type"] == "refusal"  # the input shield blocked it
    kept = (await http.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"})).json()["data"]
    assert [entry["type"] for entry in kept] == ["message", "message", "message"]  # no item opens to it
    assert _output_text({"output": kept[:1]}) == WITHHELD_TEXT
    asked = len(model.requests)

    model.enqueue_text("Going on.")
    await _respond(http, input="go on", conversation=conversation)
    (after,) = model.requests[asked:]
    assert SECRET not in json.dumps(after["messages"]) and WITHHELD_TEXT in json.dumps(after["messages"])


@pytest.mark.parametrize("kind", ["response", "compact"])
async def test_a_redacted_input_compaction_item_is_sealed_again_over_the_redacted_text(
    sealing: tuple[httpx.AsyncClient, ScriptedModel], kind: str
) -> None:
    http, model = sealing
    item = await _sealed_secret(http, model, kind)
    conversation = (await http.post("/v1/conversations", json={})).json()["id"]
    given = [item, {"type": "message", "role": "user", "content": "hello"}]
    model.enqueue_text("Hello, Ada.")
    redacting = await _respond(http, input=given, conversation=conversation, guardrails=["mail-redact"])
    assert redacting["status"] == "completed"
    read = json.dumps(model.requests[-1]["messages"])
    assert SECRET not in read and "[REDACTED:email]" in read  # the model read it redacted

    kept = (await http.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"})).json()["data"]
    assert kept[0]["type"] == "compaction" and kept[0]["id"] == item["id"]
    assert kept[0]["encrypted_content"] != item["encrypted_content"]  # sealed again
    inputs = (await http.get(f"/v1/responses/{redacting['id']}/input_items", params={"order": "asc"})).json()
    assert inputs["data"][0] == kept[0]
    model.enqueue_text("Going on.")
    await _respond(http, input="go on", conversation=conversation)
    read = json.dumps(model.requests[-1]["messages"])
    assert SECRET not in read and "[REDACTED:email]" in read  # what it sealed, redacted, is read on
