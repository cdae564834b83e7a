"""Waiting for runs live in this process to store their outcome (``TurnRunner.settled``)."""

from __future__ import annotations

import asyncio

import pytest

from ferryman.engine.channel import LiveRun, TurnRunner

pytestmark = pytest.mark.anyio


async def _ended(_: LiveRun[None]) -> None:
    """A run whose body is over at once: what is left is settling."""


async def test_the_wait_ends_when_the_run_is_settled_not_before() -> None:
    runner, gate, stored = TurnRunner(), asyncio.Event(), []

    async def settle(_: LiveRun[None]) -> None:
        await gate.wait()
        stored.append("outcome")

    runner.start("t1", _ended, settle=settle)
    waiting = asyncio.create_task(runner.settled(["t1", "not-here"], 10))
    await asyncio.sleep(0)  # the run's body ends; its settling waits on the gate
    assert not waiting.done()
    gate.set()
    await asyncio.wait_for(waiting, 5)
    assert stored == ["outcome"]


async def test_a_run_that_never_settles_is_waited_for_at_most_the_bound() -> None:
    runner, gate = TurnRunner(), asyncio.Event()

    async def settle(_: LiveRun[None]) -> None:
        await gate.wait()

    runner.start("t2", _ended, settle=settle)
    await asyncio.wait_for(runner.settled(["t2"], 0.05), 5)
    assert runner.run("t2") is not None  # still settling
    gate.set()
    await runner.shutdown()


async def test_the_runs_of_an_owner_are_waited_for_whatever_their_turns_say() -> None:
    runner, gate, stored = TurnRunner(), asyncio.Event(), []

    async def settle(_: LiveRun[None]) -> None:
        await gate.wait()
        stored.append("items")

    # A response's run: its turn is stored as completed by its body, its items only as it settles.
    runner.start("t3", _ended, settle=settle, owners=("resp_1", "session-1", "t3"))
    runner.start("t4", _ended, owners=("resp_2", "session-2", "t4"))
    waiting = asyncio.create_task(runner.settled_owned_by("session-1", 10))
    await asyncio.sleep(0)  # the runs' bodies end; session-1's settling waits on the gate
    assert not waiting.done()
    gate.set()
    await asyncio.wait_for(waiting, 5)
    assert stored == ["items"]
    await asyncio.wait_for(runner.settled_owned_by("nobody", 10), 5)
