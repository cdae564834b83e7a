"""A resume racing the run that paused its turn, or another resume of it (one process, SQLite).

A resume reads the paused turn (its pending step, its events' count) before it waits for the run that paused it
to finish recording; the run's events may be stored after that read, and then the resumed run must number on
after them. And a resume that read the turn before another resume ran it to a new pause must not answer that
new pause with what it meant for the old one: its claim names the step it answers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from ferryman.server.app import Services, build_services
from ferryman.storage.base import ResumePoint, TurnRecord
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from inprocess import check_script, migrated_sqlite, serving

pytestmark = pytest.mark.anyio

WEATHER = {"name": "get_weather", "description": "weather", "parameters": []}
ASK = {"messages": [{"role": "user", "content": "Weather?"}], "stream": False}


def answer(call_id: str) -> dict[str, Any]:
    return {"tool_responses": [{"call_id": call_id, "tool_name": "get_weather", "content": "sun"}], "stream": False}


def calling(call_id: str) -> ScriptedReply:
    return ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id=call_id)])


class Noted(SqliteStore):
    """SQLite that says when a turn paused (``pauses`` counts them), and lets a test hold reads and writes."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.pauses = 0
        self.paused = asyncio.Condition()
        self.first_seqs: list[int] = []

    async def finish_turn(self, record: TurnRecord, *args: Any, **kwargs: Any) -> None:
        await super().finish_turn(record, *args, **kwargs)
        if record.status == "awaiting_input":
            async with self.paused:
                self.pauses += 1
                self.paused.notify_all()

    async def paused_times(self, times: int) -> None:
        async with self.paused:
            await self.paused.wait_for(lambda: self.pauses >= times)

    async def save_turn_events(self, turn_id: str, first_seq: int, events: list[str]) -> None:
        self.first_seqs.append(first_seq)
        await super().save_turn_events(turn_id, first_seq, events)


class EventsAfterTheRead(Noted):
    """The first run's events are stored only once a resume has read the turn, and before that read returns."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.read = asyncio.Event()
        self.pausing: asyncio.Task[Any] | None = None

    async def save_turn_events(self, turn_id: str, first_seq: int, events: list[str]) -> None:
        await self.read.wait()
        await super().save_turn_events(turn_id, first_seq, events)

    async def resume_point(self, *args: Any, **kwargs: Any) -> ResumePoint:
        point = await super().resume_point(*args, **kwargs)
        self.read.set()  # the run that paused stores its events and leaves while the read is on its way back
        assert self.pausing is not None
        await self.pausing
        return point


class ReadBeforeAnotherResume(Noted):
    """The first resume's read returns only once another resume has run the turn to its next pause."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.reads = 0
        self.first_read = asyncio.Event()

    async def resume_point(self, *args: Any, **kwargs: Any) -> ResumePoint:
        point = await super().resume_point(*args, **kwargs)
        self.reads += 1
        if self.reads == 1:
            self.first_read.set()
            await self.paused_times(2)
        return point


async def _session_url(http: httpx.AsyncClient) -> str:
    config = {"model": "scripted-model", "instructions": "Be brief.", "client_tools": [WEATHER]}
    agent_id = (await http.post("/v1/agents", json={"agent_config": config})).json()["agent_id"]
    session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
    return f"/v1/agents/{agent_id}/session/{session.json()['session_id']}/turn"


async def _ended(services: Services, turn_id: str) -> None:
    task = services.runner.task(turn_id)
    if task is not None:
        await task


async def test_a_resume_racing_the_pausing_runs_events_numbers_on_after_them(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    model = ScriptedModel(model_ids=("scripted-model",))
    store = EventsAfterTheRead(migrated_sqlite(tmp_path / "events.db"))
    services = build_services(store, [model], sole_process=True)
    async with serving(services) as http:
        url = await _session_url(http)
        model.enqueue(calling("c1"))
        started = asyncio.create_task(http.post(url, json=ASK))
        await store.paused_times(1)  # stored paused; its events wait for the resume's read
        [turn_id] = services.runner.running()
        store.pausing = services.runner.task(turn_id)
        model.enqueue(ScriptedReply(text="Sunny."))
        resumed = await http.post(f"{url}/{turn_id}/resume", json=answer("c1"))
        assert resumed.status_code == 200 and resumed.json()["status"] == "completed", resumed.text
        assert (await started).status_code == 200
        await _ended(services, turn_id)
        replay = await http.get(f"{url}/{turn_id}/events")
    numbers = [int(line[4:]) for line in replay.text.splitlines() if line.startswith("id: ")]
    first, resumed_from = store.first_seqs
    assert first == 0 and resumed_from > 0, store.first_seqs
    assert numbers == list(range(len(numbers)))
    check_script(request, model.script)


async def test_a_resume_that_read_the_turn_before_another_resume_ran_it_does_not_answer_the_new_pause(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    model = ScriptedModel(model_ids=("scripted-model",))
    store = ReadBeforeAnotherResume(migrated_sqlite(tmp_path / "stale.db"))
    services = build_services(store, [model], sole_process=True)
    async with serving(services) as http:
        url = await _session_url(http)
        model.enqueue(calling("c1"))
        turn_id = (await http.post(url, json=ASK)).json()["turn_id"]
        model.enqueue(calling("c2"))
        late = asyncio.create_task(http.post(f"{url}/{turn_id}/resume", json=answer("c1")))  # a client's retry
        await store.first_read.wait()
        first = await http.post(f"{url}/{turn_id}/resume", json=answer("c1"))
        assert first.status_code == 200 and first.json()["status"] == "awaiting_input", first.text
        repeated = await late
        turn = (await http.get(f"{url}/{turn_id}")).json()
    assert repeated.status_code == 409, repeated.text
    assert "answered meanwhile" in repeated.json()["error"]["message"]
    assert turn["status"] == "awaiting_input"
    check_script(request, model.script)
