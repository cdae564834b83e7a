"""``Idempotency-Key``: a repeat that arrives just after the first call stored its key with the run it starts,
before that run is launched (one process: the fan-out publishes nowhere), waits for the launch and follows the
run (``TurnHost.launching``), instead of finding nothing live and ending with no event; also when the repeat
was itself about to launch the same stream (a resume's)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from ferryman.server.app import build_services
from ferryman.services.host import TurnHost
from ferryman.services.turn_plans import TurnPlans
from ferryman.storage.base import ResponseRecord, ResponseStart
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedReply, ScriptedToolCall
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

    async def start_response(self, start: ResponseStart, *args: Any, **kwargs: Any) -> None:
        await super().start_response(start, *args, **kwargs)
        if self.send_repeat is None and self.http is not None:
            self.send_repeat = asyncio.create_task(self.http.post("/v1/responses", json=BODY, headers={KEY: "k"}))
            await asyncio.wait_for(self.repeat_read.wait(), 10)

    async def get_response(self, response_id: str) -> ResponseRecord:
        found = await super().get_response(response_id)
        if self.send_repeat is not None:  # the first call waits in start_response: this is the repeat
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


WEATHER = {"name": "get_weather", "description": "weather", "parameters": []}
RESUME = {"tool_responses": [{"call_id": "c1", "tool_name": "get_weather", "content": "sun"}]}


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "json"])
async def test_a_repeat_racing_its_first_resume_to_the_launch_follows_that_run(
    tmp_path: Path, scripted: AskedModel, monkeypatch: pytest.MonkeyPatch, streamed: bool
) -> None:
    """A keyed resume and its repeat both pass their checks (the turn awaits input) and mark the turn's stream as
    being launched; the first claims the key, the repeat's write finds it held. The repeat's failed launch must
    not take the first one's mark with it: the repeat waits for that launch and follows the run."""
    first_in, repeat_in = asyncio.Event(), asyncio.Event()
    first_claimed, repeat_reading = asyncio.Event(), asyncio.Event()
    launching, remembered, events = TurnHost.launching, TurnPlans.remembered, TurnHost.events
    blocks: list[str] = []

    @asynccontextmanager
    async def racing(host: TurnHost, stream: str) -> AsyncIterator[None]:
        role = "first" if not blocks else "repeat"
        blocks.append(role)
        async with launching(host, stream):
            if role == "first":  # writes only once the repeat passed its checks too (the turn still awaited input)
                first_in.set()
                await waited(repeat_in)
            else:  # in while the first is, and writes after its write
                repeat_in.set()
                await waited(first_claimed)
            yield

    async def waited(event: asyncio.Event) -> None:
        async with asyncio.timeout(30):  # a broken race fails here rather than hanging the run
            await event.wait()

    async def held_after_the_claim(plans: TurnPlans, *args: Any) -> Any:
        if not first_claimed.is_set():  # the first call, its key claimed, before its launch
            first_claimed.set()
            await repeat_reading.wait()
        return await remembered(plans, *args)

    async def noted(host: TurnHost, *args: Any) -> Any:
        repeat_reading.set()  # the repeat's replay looks for the run now, before the first call launches it
        return await events(host, *args)

    async with serving(build_services(SqliteStore(migrated_sqlite(tmp_path / "race.db")), [scripted])) as http:
        agent = {"model": "scripted-model", "instructions": "test", "client_tools": [WEATHER]}
        agent_id = (await http.post("/v1/agents", json={"agent_config": agent})).json()["agent_id"]
        session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
        url = f"/v1/agents/{agent_id}/session/{session.json()['session_id']}/turn"
        scripted.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id="c1")]))
        scripted.enqueue(ScriptedReply(text="sunny"))
        paused = await http.post(url, json={"messages": [{"role": "user", "content": "weather?"}], "stream": False})
        resume_url, body = f"{url}/{paused.json()['turn_id']}/resume", {**RESUME, "stream": streamed}
        monkeypatch.setattr(TurnHost, "launching", racing)
        monkeypatch.setattr(TurnPlans, "remembered", held_after_the_claim)
        monkeypatch.setattr(TurnHost, "events", noted)
        first = asyncio.create_task(http.post(resume_url, json=body, headers={KEY: "race"}))
        await first_in.wait()
        repeat = await http.post(resume_url, json=body, headers={KEY: "race"})
        answered = await first
    assert blocks == ["first", "repeat"]
    assert answered.status_code == 200, answered.text
    assert (repeat.status_code, repeat.headers.get("idempotent-replayed")) == (200, "true"), repeat.text
    assert repeat.content == answered.content
    assert len(scripted.requests) == 2
