"""What one run's usage record holds: its inference steps' tokens (each once), its caller, and whether it counts
the turn (a resume does not); and the ledger's own bound."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from ferryman.api.agents import InferenceStep, ShieldCallStep, TokenUsage
from ferryman.api.content import CompletionMessage
from ferryman.auth.policy import AccessPolicy
from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.engine.events import StepCompleted, TurnStarted
from ferryman.services import usage as usage_module
from ferryman.services.access import Access
from ferryman.services.usage import WRITE_BATCH, RunUsage, UsageLedger
from ferryman.storage.domain.kinds import SCHEMA, USAGE
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.counting import CountingKernel
from ferryman.storage.kernel.memory import MemoryKernel


def _inference(step_id: str, tokens: tuple[int, int] | None) -> StepCompleted:
    usage = TokenUsage(input_tokens=tokens[0], output_tokens=tokens[1]) if tokens else None
    message = CompletionMessage(content="x")
    return StepCompleted(InferenceStep(turn_id="t", step_id=step_id, model_response=message, usage=usage))


def test_a_run_counts_each_inference_step_once_and_nothing_else() -> None:
    with acting_as(Principal(PrincipalKind.API_KEY, "bot", {"teams": ("red",)})):
        run = RunUsage("agents", "t", 0, "m", "agent-1", "session-1")
    for event in (
        TurnStarted("t"),
        _inference("s1", (10, 3)),
        StepCompleted(ShieldCallStep(turn_id="t", step_id="s2")),
        _inference("s3", (7, 2)),
        _inference("s3", (7, 2)),  # the same step again (stored anew with its final text)
        _inference("s4", None),  # a provider that reported no usage
    ):
        run.saw(event)
    put = run.put()
    assert (put.kind, put.id, put.parent) == (USAGE, "t.0", "")
    assert put.owner is not None and put.owner.key == "key:bot" and put.owner.attributes == {"teams": ("red",)}
    assert put.body == {
        "api": "agents",
        "run_id": "t",
        "agent_id": "agent-1",
        "conversation_id": "session-1",
        "model": "m",
        "input_tokens": 17,
        "output_tokens": 5,
        "turns": 1,
    }


def test_a_resume_is_a_record_of_its_own_that_does_not_count_the_turn_again() -> None:
    resumed = RunUsage("agents", "t", 12, "m", "agent-1", "session-1")
    resumed.saw(_inference("s9", (4, 4)))
    put = resumed.put()
    assert put.id == "t.12" and put.owner is None
    assert (put.body["turns"], put.body["input_tokens"], put.body["output_tokens"]) == (0, 4, 4)


@pytest.mark.anyio
async def test_the_ledger_stores_a_run_once_and_refuses_a_bound_below_one(caplog: pytest.LogCaptureFixture) -> None:
    kernel = MemoryKernel(SCHEMA)
    await kernel.open()
    ledger = UsageLedger(kernel, Access(AccessPolicy()))
    run = RunUsage("responses", "resp_1", 0, "m", None, None, owner=None)
    run.saw(_inference("s1", (1, 2)))
    for _ in range(2):  # a second store of the same run is refused by its id, and only logged
        ledger.submit(run)
        await ledger.flush()
    assert "usage of run resp_1 not stored" in caplog.text
    summary = await ledger.summary(None, "model", 0)
    assert [(row.key, row.total_tokens, row.turns) for row in summary.data] == [("m", 3, 1)]
    with pytest.raises(ValueError, match="usage.max_records"):
        UsageLedger(kernel, Access(AccessPolicy()), 0)


@pytest.mark.anyio
async def test_a_submitted_write_runs_in_the_background_and_flush_waits_for_it() -> None:
    kernel = MemoryKernel(SCHEMA)
    await kernel.open()
    ledger = UsageLedger(kernel, Access(AccessPolicy()))
    run = RunUsage("responses", "resp_2", 0, "m", None, None, owner=None)
    run.saw(_inference("s1", (4, 5)))
    ledger.submit(run)  # returns at once: nothing is stored yet
    (stored,) = await kernel.read([ops.Get(USAGE, "resp_2.0")])
    assert stored is None
    await ledger.flush()
    (stored,) = await kernel.read([ops.Get(USAGE, "resp_2.0")])
    assert stored is not None and stored.body["output_tokens"] == 5


@pytest.mark.anyio
async def test_runs_ended_while_a_write_is_under_way_are_stored_by_one_write() -> None:
    kernel = CountingKernel(MemoryKernel(SCHEMA))
    await kernel.open()
    ledger = UsageLedger(kernel, Access(AccessPolicy()))
    runs = [RunUsage("responses", f"resp_{n}", 0, "m", None, None, owner=None) for n in range(5)]
    for run in runs:  # as many runs ending before the writer first runs
        ledger.submit(run)
    await ledger.flush()
    assert kernel.writes == 1
    stored = await kernel.read([ops.Get(USAGE, f"resp_{n}.0") for n in range(5)])
    assert all(rec is not None for rec in stored)


@pytest.mark.anyio
async def test_a_record_refused_in_a_batch_does_not_lose_the_others(caplog: pytest.LogCaptureFixture) -> None:
    kernel = MemoryKernel(SCHEMA)
    await kernel.open()
    ledger = UsageLedger(kernel, Access(AccessPolicy()))
    stored_before = RunUsage("responses", "resp_a", 0, "m", None, None, owner=None)
    ledger.submit(stored_before)
    await ledger.flush()
    for run_id in ("resp_b", "resp_a", "resp_c"):  # resp_a again: its id is taken, so the batch's write fails
        ledger.submit(RunUsage("responses", run_id, 0, "m", None, None, owner=None))
    await ledger.flush()
    found = await kernel.read([ops.Get(USAGE, f"{run_id}.0") for run_id in ("resp_b", "resp_c")])
    assert all(rec is not None for rec in found)
    assert caplog.text.count("not stored") == 1 and "usage of run resp_a not stored" in caplog.text


class GatedKernel(CountingKernel):
    """Counts writes; the first waits until :attr:`gate` opens; with :attr:`failing`, every write fails."""

    def __init__(self, inner: MemoryKernel) -> None:
        super().__init__(inner)
        self.gate, self.writing, self.failing = asyncio.Event(), asyncio.Event(), False

    async def write(self, batch: Sequence[ops.Op]) -> list[Any]:
        self.writes += 1
        self.writing.set()
        await self.gate.wait()
        if self.failing:
            raise ConnectionError("the store is down")
        return await self.inner.write(batch)


def _runs(first: int, count: int) -> list[RunUsage]:
    return [RunUsage("responses", f"resp_{n}", 0, "m", None, None, owner=None) for n in range(first, first + count)]


@pytest.mark.anyio
async def test_runs_that_end_during_a_write_go_in_the_next_ones_a_batch_at_most_each() -> None:
    kernel = GatedKernel(MemoryKernel(SCHEMA))
    await kernel.open()
    ledger = UsageLedger(kernel, Access(AccessPolicy()))
    ledger.submit(_runs(0, 1)[0])
    await kernel.writing.wait()  # the first write is under way
    for run in _runs(1, WRITE_BATCH + 50):
        ledger.submit(run)
    kernel.gate.set()
    await ledger.flush()
    assert kernel.writes == 3  # 1, then 100, then 50
    stored = await kernel.read([ops.Get(USAGE, f"resp_{n}.0") for n in range(WRITE_BATCH + 51)])
    assert all(rec is not None for rec in stored)


@pytest.mark.anyio
async def test_a_store_that_fails_is_not_asked_again_for_each_record(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = GatedKernel(MemoryKernel(SCHEMA))
    await kernel.open()
    kernel.failing = True
    monkeypatch.setattr(usage_module, "MAX_PENDING", 5)
    ledger = UsageLedger(kernel, Access(AccessPolicy()))
    ledger.submit(_runs(0, 1)[0])
    await kernel.writing.wait()
    for run in _runs(1, 7):  # five wait; two more are dropped at once
        ledger.submit(run)
    assert caplog.text.count("runs' usage wait for the store") == 2
    kernel.gate.set()
    await ledger.flush()
    assert kernel.writes == 2  # the lone first run, then the five in one write: none retried alone
    assert "usage of 5 runs not stored: the store failed" in caplog.text


@pytest.mark.anyio
async def test_a_flush_after_the_writer_was_cancelled_stores_the_runs_it_left(caplog: pytest.LogCaptureFixture) -> None:
    kernel = GatedKernel(MemoryKernel(SCHEMA))
    await kernel.open()
    ledger = UsageLedger(kernel, Access(AccessPolicy()))
    ledger.submit(_runs(0, 1)[0])
    await kernel.writing.wait()
    for run in _runs(1, 3):
        ledger.submit(run)
    writer = next(task for task in asyncio.all_tasks() if task.get_name() == "usage-writer")
    writer.cancel()  # as a loop's shutdown would
    await asyncio.wait({writer})
    assert "usage of 1 runs not stored: its write was cancelled" in caplog.text
    kernel.gate.set()
    await ledger.flush()  # neither raises the writer's cancellation nor returns with runs left
    stored = await kernel.read([ops.Get(USAGE, f"resp_{n}.0") for n in range(1, 4)])
    assert all(rec is not None for rec in stored)
