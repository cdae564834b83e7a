"""A ``rollback`` behind a turn that runs on another replica and does not stop (issue #27, item 3).

The running turn is written straight into the store, leased an hour ahead, with no task here: as far as this
server knows it runs on a live replica that never acts on the cancellation. The rollback waits for it at most
``storage.rollback_wait_seconds``, and no longer than its own run lasts: cancelling the rolling-back response
ends it at once. Each test runs on every storage backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from integration_helpers import turn_url, user
from storage_backends import unopened_store

from ferryman.api.content import UserMessage
from ferryman.ids import new_id, utcnow
from ferryman.server.app import build_services
from ferryman.storage.base import Store, TurnRecord
from ferryman.storage.domain.conversations import conversations
from ferryman.testing import Script
from inprocess import agent_and_session, scripted_provider, serving

pytestmark = pytest.mark.anyio

WAIT_SECONDS = 20
SHORT_WAIT = 0.5


class _Watched:
    """The store, telling when a turn's record is read (a rollback reads it while it waits for it to stop)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.watched: str | None = None
        self.read = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def get_turn_record(self, session_id: str, turn_id: str) -> TurnRecord:
        record = await self._store.get_turn_record(session_id, turn_id)
        if turn_id == self.watched:
            self.read.set()
        return record


@dataclass
class App:
    http: httpx.AsyncClient
    store: _Watched

    async def running_elsewhere(self, session_id: str, agent_id: str | None = None) -> str:
        """A turn of the session that runs on a live replica (its lease an hour ahead); its id."""
        record = TurnRecord(
            turn_id=new_id(),
            session_id=session_id,
            agent_id=agent_id,
            status="in_progress",
            input_messages=[UserMessage(content="elsewhere")],
            started_at=utcnow(),
            lease_until=utcnow() + timedelta(hours=1),
        )
        await self.store.start_turn(record, [], load_history=False)
        self.store.watched = record.turn_id
        return record.turn_id


async def _app(backend: str, tmp_path: Path, rollback_wait: float) -> AsyncIterator[App]:
    script = Script()  # nothing is asked of the model: no turn here gets to run
    async with unopened_store(backend, tmp_path) as store:
        watched = _Watched(store)
        services = build_services(
            cast(Store, watched), [scripted_provider(script)], sole_process=True, rollback_wait_seconds=rollback_wait
        )
        async with serving(services) as http:
            yield App(http, watched)
    script.check()


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def app(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[App]:
    """A server whose rollbacks wait at most ``SHORT_WAIT`` seconds."""
    async for made in _app(request.param, tmp_path, SHORT_WAIT):
        yield made


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def patient(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[App]:
    """A server whose rollbacks wait the default (longer than a test waits)."""
    async for made in _app(request.param, tmp_path, 60.0):
        yield made


async def test_a_rollback_waits_for_a_turn_that_does_not_stop_at_most_the_setting(app: App) -> None:
    agent_id, session_id = await agent_and_session(app.http)
    running = await app.running_elsewhere(session_id, agent_id)
    url = turn_url(agent_id, session_id)
    body = {"messages": [user("instead")], "stream": False, "multitask_strategy": "rollback"}
    async with asyncio.timeout(WAIT_SECONDS):
        refused = await app.http.post(url, json=body)
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "conflict" and "storage.rollback_wait_seconds" in error["message"], error
    turns = (await app.http.get(f"/v1/agents/{agent_id}/session/{session_id}")).json()["turns"]
    assert [(t["turn_id"], t["status"]) for t in turns][0] == (running, "in_progress"), "it is not deleted"
    assert turns[1]["status"] == "failed" and turns[1]["error"]["code"] == "conflict"


async def test_a_rollback_waiting_for_a_turn_that_does_not_stop_ends_when_it_is_cancelled(patient: App) -> None:
    http = patient.http
    conversation = (await http.post("/v1/conversations", json={})).json()["id"]
    session_id = (await conversations(patient.store.kernel).get(conversation)).session_id
    running = await patient.running_elsewhere(session_id)
    body = {
        "model": "scripted-model",
        "input": "instead",
        "conversation": conversation,
        "background": True,
        "multitask_strategy": "rollback",
    }
    started = await http.post("/v1/responses", json=body)
    assert started.status_code == 200, started.text
    response_id = started.json()["id"]
    async with asyncio.timeout(WAIT_SECONDS):
        await patient.store.read.wait()  # the rollback waits for the running turn to stop
        cancelled = await http.post(f"/v1/responses/{response_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    kept = await patient.store.get_turn_record(session_id, running)
    assert kept.status == "in_progress", "a rollback cancelled while it waits deletes nothing"
