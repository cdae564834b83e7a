"""PostgreSQL: a start holding its session's row does not deadlock with the running turn's step or end.

A turn's step or end updates the turn's row, then writes history messages, whose foreign key takes KEY SHARE
on the session's row. A start takes the session's row, then inserts a running turn, whose partial unique index
(one running turn a session) waits on that transaction. Taken ``FOR UPDATE``, the row blocked the messages'
KEY SHARE: a cycle, which PostgreSQL broke by failing one of the two (a 500, or the run's end lost). Taken
``FOR NO KEY UPDATE``, starts still exclude each other and the history epoch's bumps, and the foreign-key
check passes."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from storage_backends import postgres_store
from store_records import answer, new_conversation, response_start, said

import ferryman.storage.sql.postgres as pg
from ferryman.errors import ConflictError
from ferryman.ids import utcnow

pytestmark = pytest.mark.anyio


def paced(monkeypatch: pytest.MonkeyPatch, writer: str) -> asyncio.Event:
    """Hold task ``writer`` at its first step's insert (its UPDATE of the turn done, uncommitted) until the task
    ``start`` reaches its turn's insert, holding the session's row; the event is set once ``writer`` is held."""
    turn_updated, start_waiting = asyncio.Event(), asyncio.Event()
    execute = pg._execute

    async def held(conn: Any, query: Any) -> Any:
        task = asyncio.current_task()
        name = task.get_name() if task else ""
        if name == writer and query.sql.startswith("INSERT INTO steps"):
            turn_updated.set()
            await start_waiting.wait()
        if name == "start" and query.sql.startswith("INSERT INTO turns"):
            start_waiting.set()  # the insert now waits on the writer's transaction
        return await execute(conn, query)

    monkeypatch.setattr(pg, "_execute", held)
    return turn_updated


async def test_a_finish_and_a_start_in_one_session_do_not_deadlock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with postgres_store(tmp_path) as store:
        conversation = await new_conversation(store)
        first = response_start("first", conversation)
        await store.start_response(first)  # running
        turn_updated = paced(monkeypatch, "finish")
        turn = first.turn
        done = replace(turn, status="completed", completed_at=utcnow(), output_message=said("a"))
        finish = asyncio.create_task(store.finish_turn(done, answer(turn, "a")), name="finish")
        await turn_updated.wait()
        start = asyncio.create_task(store.start_response(response_start("second", conversation)), name="start")
        results = await asyncio.gather(finish, start, return_exceptions=True)
        assert results[0] is None, "the run's end was not stored"
        assert results[1] is None or isinstance(results[1], ConflictError)


async def test_a_step_saved_and_a_start_refused_in_one_session_do_not_deadlock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The common case: a response sent to a busy conversation (strategy reject) while its running response
    saves a step. The start should be refused (409, ConversationLockedError in the service)."""
    async with postgres_store(tmp_path) as store:
        conversation = await new_conversation(store)
        first = response_start("first", conversation)
        await store.start_response(first)  # running
        turn_updated = paced(monkeypatch, "step")
        step = asyncio.create_task(store.save_step(first.turn.turn_id, answer(first.turn, "a"), 1), name="step")
        await turn_updated.wait()
        start = asyncio.create_task(store.start_response(response_start("second", conversation)), name="start")
        results = await asyncio.gather(step, start, return_exceptions=True)
        assert results[0] is None, "the run's step was not stored"
        assert isinstance(results[1], ConflictError), "a busy conversation answers 409, not a deadlock's 500"
