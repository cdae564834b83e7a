"""Schedules and their runs as records of the kernel: the state a schedule's ticks move through.

A schedule is a root record whose body is its wire form (``Schedule``), owned
by its creator. Its status is ``active`` or ``paused``; an active one holds a
lease ending at its next tick, so that a due schedule is one whose lease ended,
and :meth:`ScheduleRecords.claim_due` hands each to one replica
(``claim_expired``). The claim leases it a while longer and sets its status to
a token of that claim alone; the replica then advances it to its next tick in
the same batch that stores the run, on the condition that the status is still
its token (the compare-and-set): a pause meanwhile stops the run, and a
replica that stopped (or stalled) before that batch leaves the tick to
another once the claim's lease ends, whose claim replaces the token, so the
stalled one can no longer fire it even after that tick's run was pruned. A run
is a record under its schedule, whose id names the schedule and the tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ferryman.api.schedules import Schedule, ScheduleRun
from ferryman.ids import new_hex
from ferryman.storage.domain.kinds import SCHEDULE, SCHEDULE_RUN
from ferryman.storage.domain.records import ModelCodec, Records, Stored
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Json, Owner, Rec
from ferryman.storage.kernel.protocol import Kernel

ACTIVE = "active"
PAUSED = "paused"
_CLAIMED = "claimed:"
"""The prefix of the status a claim gives a schedule until its claimer advances or releases it."""
_PRUNE_BATCH = 100
"""The most old runs one prune deletes (the next run's prune goes on)."""


def run_id(schedule_id: str, tick: int) -> str:
    """The id of the run of ``schedule_id`` at ``tick`` (one run per tick: a second is a conflict)."""
    return f"{schedule_id}@{tick}"


@dataclass(frozen=True)
class Claimed:
    """A schedule one claim took: as stored before the claim, and the status that claim gave it.

    Attributes:
        stored: The schedule (``next_run_at``: the tick that is due) and its record (its owner).
        token: The status the claim set; the claimer's writes hold only while it is still this.
    """

    stored: Stored[Schedule]
    token: str

    @property
    def value(self) -> Schedule:
        """The schedule as stored before the claim."""
        return self.stored.value

    @property
    def rec(self) -> Rec:
        """Its record as stored before the claim (its owner)."""
        return self.stored.rec


class ScheduleRecords:
    """The schedules and their runs over one kernel.

    Args:
        kernel: The backend.
    """

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.schedules = Records(kernel, SCHEDULE, ModelCodec(Schedule), lambda schedule: schedule.id)
        self.runs = Records(kernel, SCHEDULE_RUN, ModelCodec(ScheduleRun), lambda run: run.id)

    def put(self, schedule: Schedule, owner: Owner | None) -> ops.Put:
        """The operation storing a new schedule: paused, or active and leased until its next tick."""
        paused = schedule.paused or schedule.next_run_at is None
        return ops.Put(
            SCHEDULE,
            schedule.id,
            self.schedules.codec.dump(schedule),
            owner=owner,
            status=PAUSED if paused else ACTIVE,
            lease_until=None if paused else float(schedule.next_run_at or 0),
            at=float(schedule.created_at),
        )

    def pause(self, schedule_id: str) -> ops.Patch:
        """The operation pausing a schedule: no lease, so no replica claims it."""
        return ops.Patch(
            SCHEDULE, schedule_id, merge={"paused": True}, drop=("next_run_at",), status=PAUSED, lease_until=None
        )

    def resume(self, schedule_id: str, tick: int, merge: Json | None = None) -> ops.Patch:
        """The operation making a paused schedule active again, due at ``tick`` (also setting ``merge``).

        It changes nothing (and answers False) when the schedule is not paused by then.
        """
        fields: Json = {"paused": False, "next_run_at": tick, **(merge or {})}
        return ops.Patch(
            SCHEDULE,
            schedule_id,
            merge=fields,
            status=ACTIVE,
            lease_until=float(tick),
            expect_status=frozenset({PAUSED}),
            required=False,
        )

    async def claim_due(self, now: float, hold_until: float, limit: int) -> list[Claimed]:
        """Take up to ``limit`` active schedules whose tick came by ``now``, each to this caller alone.

        Each is leased until ``hold_until`` under a status naming this claim; the values are as stored before
        the claim (``next_run_at``: the tick that is due).
        """
        token = f"{_CLAIMED}{new_hex()}"
        claimed = await self.kernel.claim_expired(SCHEDULE, now, status=token, lease_until=hold_until, limit=limit)
        return [Claimed(self.schedules.stored(rec), token) for rec in claimed]

    async def advance(self, claimed: Claimed, run: ScheduleRun, tick: int) -> None:
        """Store ``run`` and move the schedule on to ``tick``, if this claim still holds it (one batch).

        Raises:
            ConflictError: it was paused meanwhile, another replica claimed it since this claim's lease ended,
                or this run is stored already.
            NotFoundError: it was deleted meanwhile.
        """
        schedule = claimed.value
        merge: Json = {"next_run_at": tick, "last_run_at": run.scheduled_at}
        move = ops.Patch(
            SCHEDULE,
            schedule.id,
            merge=merge,
            status=ACTIVE,
            lease_until=float(tick),
            expect_status=frozenset({claimed.token}),
        )
        owner = claimed.rec.owner
        await self.kernel.write([move, self.runs.put(run, owner=owner, parent=schedule.id)])

    async def release(self, claimed: Claimed, tick: int) -> bool:
        """Lease a claimed schedule until ``tick`` again, unchanged, if this claim still holds it; whether it did."""
        keep = ops.Patch(
            SCHEDULE,
            claimed.value.id,
            status=ACTIVE,
            lease_until=float(tick),
            expect_status=frozenset({claimed.token}),
            required=False,
        )
        (changed,) = await self.kernel.write([keep])
        return bool(changed)

    def renew(self, schedule_id: str, acts_until: int) -> ops.Patch:
        """The operation moving the end of a schedule's authority to act as its owner (see ``acts_until``)."""
        return ops.Patch(SCHEDULE, schedule_id, merge={"acts_until": acts_until}, required=False)

    async def update_run(self, run_id: str, fields: Json) -> bool:
        """Set fields of a run (its turn, its status); False when it is gone (its schedule was deleted)."""
        (changed,) = await self.kernel.write([ops.Patch(SCHEDULE_RUN, run_id, merge=fields, required=False)])
        return bool(changed)

    async def prune_runs(self, schedule_id: str, keep: int) -> int:
        """Delete a schedule's runs but the newest ``keep`` (at most a batch of them); how many were deleted."""
        (old,) = await self.kernel.read(
            [ops.Page(SCHEDULE_RUN, parent=schedule_id, desc=True, offset=keep, limit=_PRUNE_BATCH)]
        )
        return await self._delete_runs([rec.id for rec in old.items])

    async def _delete_runs(self, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        results = await self.kernel.write([ops.Delete(SCHEDULE_RUN, record_id) for record_id in ids])
        return sum(1 for existed in results if existed)
