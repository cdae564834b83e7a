"""A response whose prompt crosses its ``compact_threshold`` puts one ``compaction`` item in its output (streamed
as ``response.output_item.added``/``done`` and stored), and a later response that carries it forward (by
``previous_response_id``, in its conversation, or given back in its input with the items it replaced) reads the
summary, never what the summary replaced. Driven by the ``openai`` SDK over ASGI.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from openai.types.responses.response_create_params import ContextManagement

from ferryman.engine.summary import INSTRUCTIONS
from ferryman.server.app import build_services, create_app
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel
from inprocess import BASE_URL, check_script, migrated_sqlite

pytestmark = pytest.mark.anyio

MODEL = "scripted-model"
COMPACTION: list[ContextManagement] = [{"type": "compaction", "compact_threshold": 150}]
"""Tokens (about six characters each): the first exchange fits, the second question takes the prompt past it."""
FIRST = "My name is Ada and I keep the ferries. " + "Tides and timetables. " * 25
ANSWER = "Noted, Ada. " + "The ferries run on time. " * 20
QUESTION = "What is my name?"
SUMMARY = "The user is Ada, who keeps the ferries."
SECOND = "You are Ada."
FOLLOW_UP = "And what do I keep?"


@pytest.fixture()
async def sdk(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[openai.AsyncOpenAI, ScriptedModel]]:
    """The async ``openai`` client of a server on this loop, whose model publishes a 4000-token context."""
    model = ScriptedModel(model_ids=(MODEL,), context_length=4000)
    app = create_app(
        build_services(SqliteStore(migrated_sqlite(tmp_path / "compaction.db")), [model], sole_process=True)
    )
    transport = httpx2.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx2.AsyncClient(transport=transport, base_url=BASE_URL, timeout=30) as http,
        openai.AsyncOpenAI(base_url=f"{BASE_URL}/v1", http_client=http, api_key="unused", max_retries=0) as client,
    ):
        yield client, model
    check_script(request, model.script)


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def _given(output: list[Any]) -> list[dict[str, Any]]:
    return [item.model_dump(exclude_none=True, warnings=False) for item in output]


async def _streamed(client: openai.AsyncOpenAI, **body: Any) -> tuple[list[Any], Any]:
    """A streamed response's events, and the response ``response.completed`` carries."""
    events = [event async for event in await client.responses.create(model=MODEL, stream=True, **body)]
    assert events[-1].type == "response.completed", events[-1]
    return events, events[-1].response


def _prompt(request: dict[str, Any]) -> str:
    return str(request["messages"])


@pytest.mark.parametrize("carried", ["previous_response_id", "conversation", "input"])
async def test_a_compacting_response_outputs_one_compaction_item_that_later_responses_read_in_place(
    sdk: tuple[openai.AsyncOpenAI, ScriptedModel], carried: str
) -> None:
    client, model = sdk
    model.enqueue_text(ANSWER)
    chained: dict[str, Any] = {}
    if carried == "conversation":
        chained["conversation"] = (await client.conversations.create()).id
    first = await client.responses.create(model=MODEL, input=FIRST, context_management=COMPACTION, **chained)
    assert [item.type for item in first.output] == ["message"]  # under the threshold: nothing compacted

    model.enqueue_text(SUMMARY)
    model.enqueue_text(SECOND)
    if carried == "previous_response_id":
        chained = {"previous_response_id": first.id}
    given: Any = [_user(FIRST), *_given(first.output), _user(QUESTION)] if carried == "input" else QUESTION
    events, second = await _streamed(client, input=given, context_management=COMPACTION, **chained)

    assert model.requests[1]["messages"][0]["content"] == INSTRUCTIONS  # the summary was asked for
    compacted = _prompt(model.requests[2])
    assert SUMMARY in compacted and QUESTION in compacted and "Tides" not in compacted
    assert [item.type for item in second.output] == ["compaction", "message"]
    item = second.output[0]
    assert item.encrypted_content and SUMMARY not in item.encrypted_content and "Ada" not in item.encrypted_content
    added = [e.item for e in events if e.type == "response.output_item.added" and e.item.type == "compaction"]
    done = [e for e in events if e.type == "response.output_item.done" and e.item.type == "compaction"]
    assert [a.id for a in added] == [d.item.id for d in done] == [item.id]
    assert done[0].output_index == 0 and done[0].item.encrypted_content == item.encrypted_content
    stored = await client.responses.retrieve(second.id)
    assert [entry.type for entry in stored.output] == ["compaction", "message"]
    assert stored.output[0].model_dump() == item.model_dump()

    model.enqueue_text("The ferries.")
    if carried == "previous_response_id":
        chained = {"previous_response_id": second.id}
    if carried == "input":  # everything sent again: what the compaction item replaced is left out all the same
        given = [*given, *_given(second.output), _user(FOLLOW_UP)]
    else:
        given = FOLLOW_UP
    third = await client.responses.create(model=MODEL, input=given, **chained)
    assert third.output_text == "The ferries."
    read = _prompt(model.requests[3])
    assert SUMMARY in read and QUESTION in read and SECOND in read and FOLLOW_UP in read
    assert "Tides" not in read and "run on time" not in read  # the first exchange: the summary stands for it
    assert read.count(SUMMARY) == 1


@pytest.mark.parametrize("carried", ["input", "previous_response_id"])
async def test_compacting_after_a_compaction_item_keeps_none_of_what_that_item_replaced(
    sdk: tuple[openai.AsyncOpenAI, ScriptedModel], carried: str
) -> None:
    """``POST /v1/responses/compact`` neither summarizes nor keeps (as user messages) what a response's
    ``compaction`` item replaced: only what the model reads, the item's history and what follows it."""
    client, model = sdk
    model.enqueue_text(ANSWER)
    first = await client.responses.create(model=MODEL, input=FIRST, context_management=COMPACTION)
    model.enqueue_text(SUMMARY)
    model.enqueue_text(SECOND)
    given: Any = [_user(FIRST), *_given(first.output), _user(QUESTION)]
    second = await client.responses.create(model=MODEL, input=given, context_management=COMPACTION)
    assert [item.type for item in second.output] == ["compaction", "message"]

    model.enqueue_text("Ada asked her name.")
    if carried == "input":
        body: dict[str, Any] = {"input": [*given, *_given(second.output), _user(FOLLOW_UP)]}
    else:
        body = {"previous_response_id": second.id, "input": FOLLOW_UP}
    compacted = await client.responses.compact(model=MODEL, **body)
    summarizing = _prompt(model.requests[-1])
    assert SUMMARY in summarizing and FOLLOW_UP in summarizing and "Tides" not in summarizing
    *kept, item = compacted.output
    assert item.type == "compaction"
    assert [entry.model_dump(warnings=False)["content"][0]["text"] for entry in kept] == [FOLLOW_UP]
    assert "Tides" not in compacted.model_dump_json(warnings=False)
