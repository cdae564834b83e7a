"""Double-texting in a conversation: a response sent while another runs there (issue #27, item 3).

The same strategies as the Agents API's turns (``test_multitask.py``): ``reject`` (the default: 409
``conversation_locked``), ``enqueue`` (``queued``, then run after the running one with what it added to
the conversation), ``interrupt`` (the running one cancelled) and ``rollback`` (cancelled and deleted).
Each test runs on every storage backend; the scripted model's prompts show what each response read.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from integration_helpers import message_text
from storage_backends import unopened_store

from ferryman.server.app import build_services
from ferryman.testing import Script, ScriptedReply
from inprocess import scripted_provider, serving

pytestmark = pytest.mark.anyio

WAIT_SECONDS = 20


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def app(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Script]]:
    script = Script()
    async with unopened_store(request.param, tmp_path) as store:
        async with serving(build_services(store, [scripted_provider(script)], sole_process=True)) as http:
            yield http, script
    script.check()


def _texts(request: dict[str, Any]) -> list[str]:
    return [message_text(m) for m in request["messages"] if m["role"] in ("user", "assistant") and message_text(m)]


async def _conversation(http: httpx.AsyncClient) -> str:
    created = await http.post("/v1/conversations", json={})
    assert created.status_code == 200, created.text
    return created.json()["id"]  # type: ignore[no-any-return]


async def _respond(http: httpx.AsyncClient, conversation: str, text: str, **extra: Any) -> httpx.Response:
    body = {"model": "scripted-model", "input": text, "conversation": conversation, **extra}
    return await http.post("/v1/responses", json=body)


async def _frames(http: httpx.AsyncClient, conversation: str, text: str, **extra: Any) -> list[dict[str, Any]]:
    """The data of a streamed response's events (the in-process transport hands the body over once it ended)."""
    answer = await _respond(http, conversation, text, stream=True, **extra)
    assert answer.status_code == 200, answer.text
    return [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")]


async def _listed(http: httpx.AsyncClient, conversation: str) -> list[dict[str, Any]]:
    """The conversation's responses, oldest first (ferryman's listing of one conversation's responses)."""
    listed = await http.get("/v1/responses", params={"conversation_id": conversation, "order": "asc"})
    assert listed.status_code == 200, listed.text
    return listed.json()["data"]  # type: ignore[no-any-return]


async def _until_listed(http: httpx.AsyncClient, conversation: str, count: int) -> list[dict[str, Any]]:
    async with asyncio.timeout(WAIT_SECONDS):
        while len(listed := await _listed(http, conversation)) < count:  # each read yields to the request's task
            pass
    return listed


async def _item_texts(http: httpx.AsyncClient, conversation: str) -> list[str]:
    items = (await http.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"})).json()["data"]
    return [part["text"] for item in items if item["type"] == "message" for part in item["content"]]


async def test_reject_is_the_default_and_answers_409(app: tuple[httpx.AsyncClient, Script]) -> None:
    http, script = app
    conversation = await _conversation(http)
    script.enqueue(ScriptedReply(text="first", gate="first"))
    first = asyncio.create_task(_respond(http, conversation, "one"))
    await script.wait_for_requests(1)
    for extra in ({}, {"multitask_strategy": "reject"}):
        refused = await _respond(http, conversation, "two", **extra)
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "conversation_locked", refused.text
    script.open_gate("first")
    assert (await first).json()["status"] == "completed"


async def test_enqueued_responses_wait_queued_then_run_in_order(app: tuple[httpx.AsyncClient, Script]) -> None:
    http, script = app
    conversation = await _conversation(http)
    script.enqueue(ScriptedReply(text="first", gate="first"), ScriptedReply(text="second"), ScriptedReply(text="third"))
    first = asyncio.create_task(_respond(http, conversation, "one"))
    await script.wait_for_requests(1)
    second = asyncio.create_task(_frames(http, conversation, "two", multitask_strategy="enqueue"))
    await _until_listed(http, conversation, 2)
    third = asyncio.create_task(_respond(http, conversation, "three", multitask_strategy="enqueue"))
    listed = await _until_listed(http, conversation, 3)
    assert [r["status"] for r in listed] == ["in_progress", "queued", "queued"]
    assert (await http.get(f"/v1/responses/{listed[2]['id']}")).json()["status"] == "queued"
    assert len(script.requests) == 1, "a queued response calls no model"

    script.open_gate("first")
    frames = await second
    kinds = [frame["type"] for frame in frames]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed", kinds
    assert frames[0]["response"]["status"] == "queued"
    assert (await first).json()["status"] == "completed"
    assert (answer := await third).status_code == 200 and answer.json()["status"] == "completed", answer.text
    assert _texts(script.requests[1]) == ["one", "first", "two"]
    assert _texts(script.requests[2]) == ["one", "first", "two", "second", "three"]
    assert await _item_texts(http, conversation) == ["one", "first", "two", "second", "three", "third"]


async def test_interrupt_cancels_the_running_response(app: tuple[httpx.AsyncClient, Script]) -> None:
    http, script = app
    conversation = await _conversation(http)
    script.enqueue(ScriptedReply(text="earlier"), ScriptedReply(text="never", gate="never"))
    script.enqueue(ScriptedReply(text="instead"))
    assert (await _respond(http, conversation, "before")).status_code == 200
    running = asyncio.create_task(_respond(http, conversation, "slow", background=True))
    await script.wait_for_requests(2)
    running_id = (await running).json()["id"]

    answer = await _respond(http, conversation, "never mind", multitask_strategy="interrupt")
    assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
    interrupted = (await http.get(f"/v1/responses/{running_id}")).json()
    assert interrupted["status"] == "cancelled", interrupted
    assert _texts(script.requests[2]) == ["before", "earlier", "never mind"], "a cancelled response adds nothing"
    assert await _item_texts(http, conversation) == ["before", "earlier", "never mind", "instead"]
    script.open_gate("never")


async def test_rollback_cancels_the_running_response_and_deletes_it(app: tuple[httpx.AsyncClient, Script]) -> None:
    http, script = app
    conversation = await _conversation(http)
    script.enqueue(ScriptedReply(text="earlier"), ScriptedReply(text="never", gate="never"))
    script.enqueue(ScriptedReply(text="instead"))
    kept = (await _respond(http, conversation, "before")).json()["id"]
    dropped = asyncio.create_task(_frames(http, conversation, "dropped"))
    await script.wait_for_requests(2)
    dropped_id = (await _listed(http, conversation))[1]["id"]

    answer = await _respond(http, conversation, "instead please", multitask_strategy="rollback")
    assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
    frames = await dropped  # its stream ended with its cancellation
    assert frames[-1]["type"] == "response.cancelled", frames
    assert (await http.get(f"/v1/responses/{dropped_id}")).status_code == 404
    assert [r["id"] for r in await _listed(http, conversation)] == [kept, answer.json()["id"]]
    assert _texts(script.requests[2]) == ["before", "earlier", "instead please"]
    assert await _item_texts(http, conversation) == ["before", "earlier", "instead please", "instead"]
    script.open_gate("never")
