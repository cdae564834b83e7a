"""``Idempotency-Key``: a repeat that arrives just after the first call stored its key with the run it starts,
before that run is launched (one process: the fan-out publishes nowhere), waits for the launch and follows the
run (``TurnHost.launching``), instead of finding nothing live and ending with no event."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ferryman.server.app import build_services
from ferryman.storage.base import ResponseRecord
from ferryman.storage.sqlite import SqliteStore
from inprocess import AskedModel, migrated_sqlite, serving
from sse import frames

pytestmark = pytest.mark.anyio

KEY = "Idempotency-Key"
BODY = {"model": "scripted-model", "input": "hi", "stream": True}


class RepeatsBeforeTheLaunch(SqliteStore):
    """SQLite that, once the first keyed response has stored its record and key (its input items with them),
    sends the repeat and goes on once the repeat has read the response (from there it chooses how to follow the
    run without waiting on anything else)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.send_repeat: asyncio.Task[httpx.Response] | None = None
        self.http: httpx.AsyncClient | None = None
        self.repeat_read = asyncio.Event()

    async def save_response(self, record: ResponseRecord, *args: Any, **kwargs: Any) -> None:
        await super().save_response(record, *args, **kwargs)
        if self.send_repeat is None and self.http is not None:
            self.send_repeat = asyncio.create_task(self.http.post("/v1/responses", json=BODY, headers={KEY: "k"}))
            await asyncio.wait_for(self.repeat_read.wait(), 10)

    async def get_response(self, response_id: str) -> ResponseRecord:
        found = await super().get_response(response_id)
        if self.send_repeat is not None:  # the first call waits in add_items: this is the repeat
            self.repeat_read.set()
        return found


@pytest.fixture()
async def served(
    tmp_path: Path, scripted: AskedModel
) -> AsyncIterator[tuple[httpx.AsyncClient, RepeatsBeforeTheLaunch]]:
    store = RepeatsBeforeTheLaunch(migrated_sqlite(tmp_path / "idem.db"))
    async with serving(build_services(store, [scripted])) as http:
        store.http = http
        yield http, store


async def test_a_repeat_just_after_the_key_was_settled_gets_the_run_or_a_409(
    served: tuple[httpx.AsyncClient, RepeatsBeforeTheLaunch], scripted: AskedModel
) -> None:
    http, store = served
    scripted.enqueue_text("streamed once")
    first = await http.post("/v1/responses", json=BODY, headers={KEY: "k"})
    assert store.send_repeat is not None
    repeat = await asyncio.wait_for(store.send_repeat, 20)
    streamed = [frame.event for frame in frames(first)]
    assert streamed[-1] == "response.completed"
    if repeat.status_code == 409:  # told to retry: fine
        return
    assert repeat.headers.get("idempotent-replayed") == "true"
    assert [frame.event for frame in frames(repeat)] == streamed, "the repeat is an empty (or cut) replay"
