"""``Idempotency-Key``: a first call that fails after its key's outcome went in with the run it stored (a database
blip before the run was launched) gives the key back, as every 5xx does: a retry runs."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from ferryman.api.content import Message
from ferryman.errors import InternalError
from ferryman.server.app import build_services
from ferryman.services.fork_reads import ForkReads
from ferryman.services.responses import starts
from ferryman.services.responses.redaction import InputItems
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedReply, ScriptedToolCall
from inprocess import AskedModel, migrated_sqlite, serving
from sse import frames

pytestmark = pytest.mark.anyio

KEY = "Idempotency-Key"
COUNTS = tuple(
    f"SELECT count(*) FROM {where}"
    for where in ("responses", "turns", "sessions", "records WHERE kind IN ('response', 'session', 'item')")
)
"""How many rows a response leaves: its own, its turn's, its session's, and its records (its own, its session's,
its input items)."""
REPLAYED = "idempotent-replayed"
WEATHER = {"name": "get_weather", "description": "weather", "parameters": []}


class FailsOnceAfterAResume(SqliteStore):
    """SQLite whose first read after a resume was claimed, before its run is launched (the history a fork
    shares), fails (a database blip)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.claimed = False

    async def claim_resume(self, *args: Any, **kwargs: Any) -> Any:
        resumed = await super().claim_resume(*args, **kwargs)
        self.claimed = True
        return resumed

    def blip_after_claims(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Make the next read of a fork's shared history after a claim fail."""
        shared = ForkReads.inherited_history

        async def read(reads: ForkReads, session_id: str) -> list[Message]:
            if self.claimed:
                self.claimed = False
                raise InternalError("the database went away for a moment")
            return await shared(reads, session_id)

        monkeypatch.setattr(ForkReads, "inherited_history", read)


def _shown(response: httpx.Response) -> list[tuple[str, str]] | str:
    """A response's events (name, start of data), or its body when it is not a stream."""
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        return response.text
    return [(frame.event, frame.data[:80]) for frame in frames(response)]


def client_over(store: SqliteStore, model: AskedModel) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    return serving(build_services(store, [model]))


async def test_a_streamed_response_that_failed_after_its_key_was_settled_gives_the_key_back(
    tmp_path: Path, scripted: AskedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not, for the key's 24 hours, an empty replay of a response that never ran; nor it left behind, running or
    queued for ever."""
    db = tmp_path / "idem.db"
    store = SqliteStore(migrated_sqlite(db))
    body: dict[str, Any] = {"model": "scripted-model", "input": "hi", "stream": True}
    failures = [InternalError("the run could not be prepared")]

    def prepared_once(*args: Any) -> InputItems:
        if failures:  # after the response and its key are stored, before the run is launched
            raise failures.pop()
        return InputItems(*args)

    monkeypatch.setattr(starts, "InputItems", prepared_once)
    async with client_over(store, scripted) as http:
        failed = await http.post("/v1/responses", json=body, headers={KEY: "blip"})
        assert failed.status_code == 500, failed.text
        with sqlite3.connect(db) as connection:  # the response, its turn and its own session: all gone
            left = [connection.execute(count).fetchone()[0] for count in COUNTS]
        assert left == [0, 0, 0, 0]
        scripted.enqueue_text("second try")
        retried = await asyncio.wait_for(http.post("/v1/responses", json=body, headers={KEY: "blip"}), 20)
        assert REPLAYED not in retried.headers, (
            f"a 500 was settled as a replay: {retried.status_code} {_shown(retried)}"
        )
        shown = _shown(retried)
        assert shown and shown[-1][0] == "response.completed"


async def test_a_streamed_resume_that_failed_after_its_key_was_settled_is_not_replayed(
    tmp_path: Path, scripted: AskedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a replay of a run nobody runs."""
    store = FailsOnceAfterAResume(migrated_sqlite(tmp_path / "idem.db"))
    store.blip_after_claims(monkeypatch)
    async with client_over(store, scripted) as http:
        agent = await http.post(
            "/v1/agents",
            json={"agent_config": {"model": "scripted-model", "instructions": "t", "client_tools": [WEATHER]}},
        )
        agent_id = agent.json()["agent_id"]
        session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
        url = f"/v1/agents/{agent_id}/session/{session.json()['session_id']}/turn"
        scripted.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="get_weather", call_id="c1")]))
        paused = await http.post(url, json={"messages": [{"role": "user", "content": "weather?"}], "stream": False})
        turn_id = paused.json()["turn_id"]
        resume = {"tool_responses": [{"call_id": "c1", "tool_name": "get_weather", "content": "sun"}], "stream": True}
        failed = await http.post(f"{url}/{turn_id}/resume", json=resume, headers={KEY: "resume-blip"})
        assert failed.status_code == 500, failed.text
        try:
            retried = await asyncio.wait_for(
                http.post(f"{url}/{turn_id}/resume", json=resume, headers={KEY: "resume-blip"}), 5
            )
        except TimeoutError:
            pytest.fail("the retry of a resume answered 500 hangs, replaying a run that never started")
        assert REPLAYED not in retried.headers, (
            f"a 500 was settled as a replay: {retried.status_code} {_shown(retried)}"
        )
