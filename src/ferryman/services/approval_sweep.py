"""Continuing the runs whose approvals were decided when the process deciding them died before continuing them.

Every decision, and the claim of a run's continuation, leases its held call
until the run has been continued (see :mod:`ferryman.services.approvals`). A
process that dies in between leaves the lease to run out. Each replica looks
every ``interval`` seconds and takes the held calls whose lease ran out, each
to exactly one replica (the kernel's ``claim_expired``); for each, it
continues the run if it still waits, once:

- a call whose run still has a pending call, whose turn no longer waits for
  input, or whose response was continued already, needs nothing: its lease
  goes;
- otherwise the run's continuation is taken as a decision takes it (the
  compare-and-set of the run's first call from ``decided`` to ``continued``),
  or is this replica's already when the call it took is that first call,
  claimed by a process that died;
- the run goes on as the principal who started the run that paused (the
  turn's owner, or the response's: a continuing response is owned like the one
  it continues), through the same paths as a decision's, as a decision by
  another caller than that principal would (a subject's stored attributes too
  old to act with give the run up, as an error of the API does).

A continuation that fails with an error of the API (the turn moved on, the
model is gone) is given up; any other failure keeps the lease, and a later
look tries again.
"""

from __future__ import annotations

import logging
import time

from ferryman.auth.principal import acting_as
from ferryman.errors import FerrymanError, NotFoundError
from ferryman.periodic import Periodic
from ferryman.storage.base import Store
from ferryman.storage.domain.approvals import CONTINUED, HeldCall, HeldCalls
from ferryman.storage.domain.records import Stored

from .approvals import ApprovalService

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 30.0
BATCH = 50


class ApprovalSweep:
    """The loop that continues stalled runs, and one look of it (:meth:`once`), which tests call themselves.

    Args:
        approvals: Continues runs.
        calls: The held calls.
        store: The turns.
        interval: Seconds between looks.
    """

    def __init__(
        self, approvals: ApprovalService, calls: HeldCalls, store: Store, interval: float = INTERVAL_SECONDS
    ) -> None:
        self._approvals = approvals
        self._calls = calls
        self._store = store
        self._loop = Periodic("approval-sweep", self.once, interval)

    async def start(self) -> None:
        """Look now (what a stopped replica left) and every ``interval`` seconds."""
        self._loop.start()

    async def stop(self) -> None:
        """Stop looking (the runs it continued go on)."""
        await self._loop.stop()

    async def once(self, now: float | None = None) -> int:
        """Continue the runs of the held calls whose lease ran out before ``now``; how many went on."""
        at = time.time() if now is None else now
        continued = 0
        while True:
            taken = await self._calls.stalled(at, time.time() + self._approvals.hold_seconds, BATCH)
            for held in taken:
                continued += await self._resume(held)
            if len(taken) < BATCH:
                return continued

    async def _resume(self, held: Stored[HeldCall]) -> int:
        """Continue the run of one stalled call if it still waits; 1 if it went on."""
        call = held.value
        try:
            if not await self._still_waits(call):
                await self._calls.settle([call.id])
                return 0
            owner = await self._approvals.run_as(held)
            with acting_as(owner.principal):
                await self._approvals.continue_run(call, taken=held.rec.status == CONTINUED, since=owner.since)
        except FerrymanError as exc:
            log.warning("approval %s: its %s is not continued: %s", call.id, call.source, exc.message)
            await self._calls.settle([c.value.id for c in await self._calls.of_run(call)] or [call.id])
            return 0
        except Exception:
            log.exception("approval %s: continuing its %s failed; a later look tries again", call.id, call.source)
            return 0
        return 1

    async def _still_waits(self, call: HeldCall) -> bool:
        """Whether the call's turn still awaits input, or its response was not continued yet."""
        if call.source == "response":
            return call.next_response_id is None
        assert call.session_id is not None and call.turn_id is not None
        try:
            record = await self._store.get_turn_record(call.session_id, call.turn_id)
        except NotFoundError:
            return False
        return record.status == "awaiting_input"
