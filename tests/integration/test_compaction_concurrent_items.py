"""Items a client adds to a conversation while a compacting response runs there (after the response read the
conversation, before its output, with the ``compaction`` item, is stored) stand before that item, yet its
summary never saw them: later responses read them right after the item's history, in conversation order, and
the conversation lists them as ever. On every backend, as the order of stored items is each one's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from storage_backends import unopened_store

from ferryman.server.app import build_services
from ferryman.testing import ScriptedModel
from inprocess import check_script, serving

pytestmark = pytest.mark.anyio

MODEL = "scripted-model"
COMPACTION = [{"type": "compaction", "compact_threshold": 150}]
"""Tokens (about six characters each): the first exchange fits, the second question takes the prompt past it."""
FIRST = "My name is Ada and I keep the ferries. " + "Tides and timetables. " * 25
ANSWER = "Noted, Ada. " + "The ferries run on time. " * 20
QUESTION = "What is my name?"
SUMMARY = "The user is Ada, who keeps the ferries."
SECOND = "You are Ada."
LIGHTHOUSE = "I keep the lighthouse too."
BOATS = "And two rowing boats."
FOLLOW_UP = "What do I keep?"


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def served(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, ScriptedModel]]:
    """The app on each backend, whose model publishes a 4000-token context."""
    model = ScriptedModel(model_ids=(MODEL,), context_length=4000)
    async with unopened_store(request.param, tmp_path) as store:
        async with serving(build_services(store, [model], sole_process=True)) as http:
            yield http, model
    check_script(request, model.script)


async def _create(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    answer = await http.post("/v1/responses", json={"model": MODEL, **body})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def _add(http: httpx.AsyncClient, conversation: str, *texts: str) -> None:
    items = [{"type": "message", "role": "user", "content": text} for text in texts]
    added = await http.post(f"/v1/conversations/{conversation}/items", json={"items": items})
    assert added.status_code == 200, added.text


async def _ended(http: httpx.AsyncClient, response_id: str) -> None:
    """Once the response ended (its stream, followed to its end)."""
    async with http.stream("GET", f"/v1/responses/{response_id}", params={"stream": "true"}) as events:
        assert events.status_code == 200
        async for _ in events.aiter_lines():
            pass


async def _listed(http: httpx.AsyncClient, conversation: str) -> list[dict[str, Any]]:
    """The items the conversation lists, oldest first."""
    page = await http.get(f"/v1/conversations/{conversation}/items", params={"order": "asc", "limit": 100})
    assert page.status_code == 200, page.text
    return list(page.json()["data"])


def _texts(items: list[dict[str, Any]]) -> list[str]:
    """Each message's text, or the item's type."""
    return [item["content"][0]["text"] if item["type"] == "message" else item["type"] for item in items]


def _said(request: dict[str, Any]) -> list[str]:
    """Each message of a prompt as text, in order."""
    return [str(message["content"]) for message in request["messages"]]


def _at(said: list[str], text: str) -> int:
    (found,) = [index for index, message in enumerate(said) if text in message]  # once, never twice
    return found


async def _conversation(http: httpx.AsyncClient, model: ScriptedModel) -> str:
    """A conversation holding a first exchange under the threshold."""
    conversation = str((await http.post("/v1/conversations", json={})).json()["id"])
    model.enqueue_text(ANSWER)
    await _create(http, input=FIRST, conversation=conversation, context_management=COMPACTION)
    return conversation


async def test_items_added_while_a_response_compacts_are_read_after_its_summary(
    served: tuple[httpx.AsyncClient, ScriptedModel],
) -> None:
    http, model = served
    conversation = await _conversation(http, model)
    model.enqueue_text(SUMMARY)
    model.enqueue_text(SECOND, gate="answer")
    body = {"input": QUESTION, "conversation": conversation, "context_management": COMPACTION}
    running = asyncio.create_task(_create(http, **body))
    await model.script.wait_for_requests(3)  # it read the conversation, summarized it, and waits to answer
    await _add(http, conversation, LIGHTHOUSE, BOATS)
    model.script.open_gate("answer")
    second = await running
    assert [item["type"] for item in second["output"]] == ["compaction", "message"]
    assert LIGHTHOUSE not in str(model.requests[2]["messages"])  # the response itself never saw them

    model.enqueue_text("The ferries, a lighthouse and two boats.")
    await _create(http, input=FOLLOW_UP, conversation=conversation)
    said = _said(model.requests[-1])
    assert "Tides" not in str(said)  # the summary still stands for the first exchange
    order = [_at(said, text) for text in (SUMMARY, QUESTION, LIGHTHOUSE, BOATS, SECOND, FOLLOW_UP)]
    assert order == sorted(order), said
    listed = await _listed(http, conversation)
    texts = [FIRST, ANSWER, LIGHTHOUSE, BOATS, QUESTION, "compaction", SECOND, FOLLOW_UP]
    assert _texts(listed)[:-1] == texts  # and the last answer

    model.enqueue_text("Ada keeps the ferries, a lighthouse and two boats.")  # the conversation, compacted again
    compacted = await http.post("/v1/responses/compact", json={"model": MODEL, "input": listed})
    assert compacted.status_code == 200, compacted.text
    summarizing = str(model.requests[-1]["messages"])
    assert LIGHTHOUSE in summarizing and BOATS in summarizing and "Tides" not in summarizing
    assert _texts(compacted.json()["output"]) == [LIGHTHOUSE, BOATS, FOLLOW_UP, "compaction"]  # kept as read


async def test_a_queued_compacting_response_reads_what_came_while_it_waited_and_not_what_came_while_it_ran(
    served: tuple[httpx.AsyncClient, ScriptedModel],
) -> None:
    """A queued response reads the conversation when it starts: what was added while it waited is in its
    compacted history (read once), what was added while it ran comes after it."""
    http, model = served
    conversation = await _conversation(http, model)
    model.enqueue_text("Noted.", gate="first")
    busy = await _create(http, input="Hello.", conversation=conversation, background=True)
    await model.script.wait_for_requests(2)
    model.enqueue_text(SUMMARY)
    model.enqueue_text(SECOND, gate="answer")
    body = {"input": QUESTION, "conversation": conversation, "context_management": COMPACTION}
    queued = await _create(http, **body, background=True, multitask_strategy="enqueue")
    assert queued["status"] == "queued"
    await _add(http, conversation, LIGHTHOUSE)  # while it waits
    model.script.open_gate("first")
    await _ended(http, busy["id"])
    await model.script.wait_for_requests(4)  # it started, summarized, and waits to answer
    await _add(http, conversation, BOATS)  # while it runs
    model.script.open_gate("answer")
    await _ended(http, queued["id"])

    model.enqueue_text("The ferries, a lighthouse and two boats.")
    await _create(http, input=FOLLOW_UP, conversation=conversation)
    answering = str(model.requests[3]["messages"])
    assert LIGHTHOUSE in answering and BOATS not in answering  # kept past the summary, as the newest are
    said = _said(model.requests[-1])
    order = [_at(said, text) for text in (SUMMARY, LIGHTHOUSE, QUESTION, BOATS, SECOND, FOLLOW_UP)]
    assert order == sorted(order), said  # the lighthouse once: in the history, not again after it
