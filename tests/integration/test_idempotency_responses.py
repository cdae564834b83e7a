"""A stored response answered at once (not streamed) keeps its ``Idempotency-Key`` with the response it starts.

The key is claimed by the write that stores the response, not by a trip of its own before it, and a repeat is
answered from the response as its run left it: waiting for a run still going, as the first call waits; with the
failure the run ended with when a retry could not change it; and again from the start once the response is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from ferryman.server.app import build_services
from ferryman.services.responses.reads import ResponseReads
from ferryman.storage.base import IdempotencyRecord
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel, ScriptedReply
from inprocess import AskedModel, RefusingModel, migrated_sqlite, serving

pytestmark = pytest.mark.anyio

KEY = "Idempotency-Key"
REPLAYED = "idempotent-replayed"
BODY = {"model": "scripted-model", "input": "hi"}


class CountingStore(SqliteStore):
    """SQLite, counting the keys claimed and completed on their own (not with the write of a response)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.claims = 0
        self.completions = 0

    async def claim_idempotency_key(self, claim: IdempotencyRecord, now: datetime) -> IdempotencyRecord | None:
        self.claims += 1
        return await super().claim_idempotency_key(claim, now)

    async def complete_idempotency_key(self, claim: IdempotencyRecord, result: str, expires_at: datetime) -> bool:
        self.completions += 1
        return await super().complete_idempotency_key(claim, result, expires_at)


@pytest.fixture()
def store(tmp_path: Path) -> CountingStore:
    return CountingStore(migrated_sqlite(tmp_path / "idem.db"))


def client_over(store: SqliteStore, model: ScriptedModel) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    """A client of one app instance over ``store``, its lifespan running (which opens the store)."""
    return serving(build_services(store, [model]))


@pytest.fixture()
async def http(store: CountingStore, scripted: AskedModel) -> AsyncIterator[httpx.AsyncClient]:
    async with client_over(store, scripted) as client:
        yield client


async def post(http: httpx.AsyncClient, key: str, **extra: Any) -> httpx.Response:
    return await http.post("/v1/responses", json={**BODY, **extra}, headers={KEY: key})


async def test_the_key_goes_in_with_the_response_and_a_repeat_is_the_first_answer(
    http: httpx.AsyncClient, scripted: AskedModel, store: CountingStore
) -> None:
    scripted.enqueue_text("plain")
    first = await post(http, "plain-key")
    assert first.status_code == 200 and first.json()["status"] == "completed", first.text
    assert (store.claims, store.completions) == (0, 0)  # no trip of its own, before or after
    again = await post(http, "plain-key")
    assert (again.status_code, again.content, again.headers[REPLAYED]) == (200, first.content, "true")
    assert len(scripted.requests) == 1


async def test_a_repeat_while_the_first_response_runs_waits_for_its_answer_and_never_runs_again(
    http: httpx.AsyncClient, scripted: AskedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    following = asyncio.Event()
    original = ResponseReads.replay

    async def replay(reads: ResponseReads, *args: Any) -> Any:
        following.set()
        return await original(reads, *args)

    monkeypatch.setattr(ResponseReads, "replay", replay)
    scripted.enqueue(ScriptedReply(text="held", gate="hold"))
    first = asyncio.create_task(post(http, "held-key"))
    await scripted.asked.wait()
    repeat = asyncio.create_task(post(http, "held-key"))
    with anyio.fail_after(30):  # a repeat answered at once (a 409) never follows the run
        await following.wait()
    scripted.script.open_gate("hold")
    answered, repeated = await first, await repeat
    assert answered.status_code == 200 and answered.json()["output"][0]["content"][0]["text"] == "held"
    assert (repeated.status_code, repeated.content, repeated.headers[REPLAYED]) == (200, answered.content, "true")
    assert len(scripted.requests) == 1


async def test_a_response_that_failed_with_a_client_error_is_kept_and_replayed(store: CountingStore) -> None:
    model = RefusingModel()
    async with client_over(store, model) as http:
        failed = await post(http, "refused-key")
        assert failed.status_code == 400 and failed.json()["error"]["code"] == "invalid_request", failed.text
        again = await post(http, "refused-key")
        assert (again.status_code, again.json(), again.headers[REPLAYED]) == (400, failed.json(), "true")
    assert len(model.requests) == 1


@pytest.mark.parametrize("streamed", [False, True], ids=["json", "streamed"])
async def test_a_response_deleted_since_is_not_found_and_never_runs_again(
    http: httpx.AsyncClient, scripted: AskedModel, streamed: bool
) -> None:
    scripted.enqueue_text("first")
    first = await post(http, "gone-key", stream=streamed)
    assert first.status_code == 200, first.text
    response_id = (await http.get("/v1/responses", params={"limit": 1})).json()["data"][0]["id"]
    assert (await http.delete(f"/v1/responses/{response_id}")).status_code == 200
    for _ in range(2):  # the key stays: a retry is not a new request
        again = await post(http, "gone-key", stream=streamed)
        assert again.status_code == 404, again.text
    assert len(scripted.requests) == 1


@pytest.mark.parametrize("extra", [{"store": False}, {"background": True}], ids=["unstored", "background"])
async def test_a_response_not_read_again_from_its_run_claims_first_and_keeps_its_answer(
    http: httpx.AsyncClient, scripted: AskedModel, store: CountingStore, extra: dict[str, Any]
) -> None:
    scripted.enqueue_text("kept")
    first = await post(http, "kept-key", **extra)
    assert first.status_code == 200, first.text
    again = await post(http, "kept-key", **extra)
    assert (again.status_code, again.content, again.headers[REPLAYED]) == (200, first.content, "true")
    assert (store.claims, store.completions) == (2, 1)  # each call claims first; the first keeps its answer
