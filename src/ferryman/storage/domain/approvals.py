"""Server tool calls held for approval, over the kernel: one ``approval`` record per held call.

A paused turn's approval requests and a response's ``mcp_approval_request``
items are written when the run pauses, owned like the session or response that
holds them, so that the inbox of calls waiting for a person is one indexed page
of ``pending`` records. A decision is a compare-and-set of the status
(``pending`` to ``decided``): of two decisions on one call, the second finds
nothing to change. Once every call a run holds is decided, the one caller that
moves the run's first record from ``decided`` to ``continued`` continues the
run (the same compare-and-set, so a run is never continued twice). Calls
answered another way (a client's resume, an ``mcp_approval_response`` input)
become ``answered``, and once a run is continued every call of its pause
leaves ``decided`` for ``continued``, so a later pause of the same turn is
decided on its own. A call is held once: holding it again never reopens an
answer. Deleting the session, conversation or response deletes its records.

A decision and a claim each put a lease on their record, which the caller
drops once the run is continued (or is not its to continue). A lease that ran
out marks a continuation a process died before finishing: the sweep
(:mod:`ferryman.services.approval_sweep`) takes such records, each to one
replica, and continues their runs.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel

from ferryman.errors import ConflictError
from ferryman.storage.domain.kinds import APPROVAL
from ferryman.storage.domain.records import ModelCodec, Records, Stored
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.filters import ALL, Filter
from ferryman.storage.kernel.model import Owner, PageOf
from ferryman.storage.kernel.protocol import Kernel

PENDING = "pending"
"""Waiting for a decision (the only status the inbox lists)."""
DECIDED = "decided"
"""Approved or denied (``HeldCall.decision``), the run not continued yet."""
CONTINUED = "continued"
"""Set on a run's first record by the caller that continues the run."""
ANSWERED = "answered"
"""Decided outside the inbox (the client resumed the turn, or answered the response, itself)."""

FORGET_PAGE = 100
"""How many held calls of a deleted scope one read takes."""

Source = Literal["turn", "response"]


class HeldCall(BaseModel):
    """One held call as stored.

    ``scope`` is what deleting deletes it with: the turn's session, the response's conversation's session, or
    the response. ``held_with`` names the calls held by the same pause (this one included): a turn pauses again
    after it is continued, and only the calls of its latest pause are decided together.
    """

    id: str
    source: Source
    scope: str
    agent_id: str | None = None
    session_id: str | None = None
    turn_id: str | None = None
    response_id: str | None = None
    conversation_id: str | None = None
    call_id: str
    tool_name: str
    arguments: dict[str, Any] | str
    digest: str
    server_label: str | None = None
    decision: Literal["approved", "denied"] | None = None
    reason: str | None = None
    decided_at: float | None = None
    next_response_id: str | None = None
    held_with: list[str] = []


def turn_approval_id(turn_id: str, call_id: str) -> str:
    """The id of a turn's held call: call ids are the model's, unique only within their turn."""
    return "apr_" + hashlib.sha256(f"{turn_id}\n{call_id}".encode()).hexdigest()[:40]


class HeldCalls:
    """The held calls of every run, by the kernel.

    Args:
        kernel: The backend.
    """

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._records = Records(kernel, APPROVAL, ModelCodec(HeldCall), lambda call: call.id)

    async def hold(self, calls: Sequence[HeldCall], owner: Owner | None) -> None:
        """Store a run's held calls as pending, those not stored yet (one answered meanwhile stays answered)."""
        (stored,) = await self._kernel.read([ops.GetMany(APPROVAL, tuple(c.id for c in calls))])
        known = {rec.id for rec in stored}
        dump = self._records.codec.dump
        puts = [ops.Put(APPROVAL, c.id, dump(c), owner=owner, status=PENDING) for c in calls if c.id not in known]
        if not puts:
            return
        try:
            await self._kernel.write(puts)
        except ConflictError:  # some held at the same moment by another writer: store the others
            for put in puts:
                with contextlib.suppress(ConflictError):
                    await self._kernel.write([put])

    async def find(self, approval_id: str, allow: Filter = ALL) -> Stored[HeldCall] | None:
        """A held call, whatever its status (None: missing, or ``allow`` excludes it)."""
        return await self._records.find(approval_id, allow=allow)

    async def pending(
        self, allow: Filter, where: tuple[str, str] | None, after: str | None, limit: int, desc: bool
    ) -> PageOf[Stored[HeldCall]]:
        """A page of the pending calls ``allow`` admits, in the order they began waiting."""
        return await self._records.stored_page(
            allow=allow, where=where, after=after, limit=limit, desc=desc, statuses=frozenset({PENDING})
        )

    async def decide(self, approval_id: str, approve: bool, reason: str | None, at: float, hold_until: float) -> bool:
        """Record a decision on a pending call, leased until ``hold_until``; whether it was pending."""
        merge = {"decision": "approved" if approve else "denied", "reason": reason, "decided_at": at}
        patch = ops.Patch(
            APPROVAL,
            approval_id,
            merge=merge,
            status=DECIDED,
            lease_until=hold_until,
            expect_status=frozenset({PENDING}),
            required=False,
        )
        (changed,) = await self._kernel.write([patch])
        return bool(changed)

    async def of_run(self, call: HeldCall) -> list[Stored[HeldCall]]:
        """Every call held by the pause that holds ``call`` and not answered elsewhere, in the order they were held."""
        live = {PENDING, DECIDED, CONTINUED}
        return [held for held in await self.of_ids(call.held_with or [call.id]) if held.rec.status in live]

    async def of_ids(self, approval_ids: Sequence[str]) -> list[Stored[HeldCall]]:
        """The held calls with these ids that exist, in the order asked."""
        if not approval_ids:
            return []
        (found,) = await self._kernel.read([ops.GetMany(APPROVAL, tuple(approval_ids))])
        return [self._records.stored(rec) for rec in found]

    async def claim(self, first_id: str, hold_until: float) -> bool:
        """Take the continuation of a run whose calls are all decided, leased; whether this caller took it."""
        patch = ops.Patch(
            APPROVAL,
            first_id,
            status=CONTINUED,
            lease_until=hold_until,
            expect_status=frozenset({DECIDED}),
            required=False,
        )
        (changed,) = await self._kernel.write([patch])
        return bool(changed)

    async def unclaim(self, first_id: str) -> None:
        """Give back a continuation that could not be started (the decisions stand; its lease lets a sweep retry)."""
        patch = ops.Patch(APPROVAL, first_id, status=DECIDED, expect_status=frozenset({CONTINUED}), required=False)
        await self._kernel.write([patch])

    async def settle(self, approval_ids: Sequence[str], merge: dict[str, Any] | None = None) -> None:
        """Drop the leases of held calls whose run needs nothing more of this caller; add ``merge`` to their bodies."""
        if approval_ids:
            patches = [ops.Patch(APPROVAL, i, merge=merge, lease_until=None, required=False) for i in approval_ids]
            await self._kernel.write(patches)

    async def stalled(self, now: float, hold_until: float, limit: int) -> list[Stored[HeldCall]]:
        """Take up to ``limit`` calls whose lease ran out before ``now`` (each to one caller), leased anew."""
        recs = await self._kernel.claim_expired(APPROVAL, now, status=None, lease_until=hold_until, limit=limit)
        return [self._records.stored(rec) for rec in recs]

    async def decided(self, approval_ids: Sequence[str]) -> list[HeldCall]:
        """The decided calls among these (continued or not)."""
        found = await self.of_ids(approval_ids)
        return [held.value for held in found if held.rec.status in (DECIDED, CONTINUED) and held.value.decision]

    async def close(self, approval_ids: Sequence[str]) -> None:
        """The run holding these calls was continued: each leaves the inbox for good, its lease dropped.

        A pending call becomes ``answered``, a decided one ``continued``: no later pause of the run sees them.
        """
        patches = []
        for i in approval_ids:
            patches.append(
                ops.Patch(
                    APPROVAL, i, status=ANSWERED, lease_until=None, expect_status=frozenset({PENDING}), required=False
                )
            )
            patches.append(
                ops.Patch(
                    APPROVAL,
                    i,
                    status=CONTINUED,
                    lease_until=None,
                    expect_status=frozenset({DECIDED, CONTINUED}),
                    required=False,
                )
            )
        if patches:
            await self._kernel.write(patches)

    async def drop(self, approval_ids: Sequence[str]) -> None:
        """Take calls out of the inbox for good, whatever their status: their run can no longer go on with them."""
        expect = frozenset({PENDING, DECIDED, CONTINUED})
        patches = [
            ops.Patch(APPROVAL, i, status=ANSWERED, lease_until=None, expect_status=expect, required=False)
            for i in approval_ids
        ]
        if patches:
            await self._kernel.write(patches)

    async def reopen(self, approval_ids: Sequence[str]) -> None:
        """Put decided calls whose run could not be continued back in the inbox, undecided."""
        undecided = {"decision": None, "reason": None, "decided_at": None}
        expect = frozenset({DECIDED, CONTINUED})
        patches = [
            ops.Patch(
                APPROVAL, i, merge=undecided, status=PENDING, lease_until=None, expect_status=expect, required=False
            )
            for i in approval_ids
        ]
        if patches:
            await self._kernel.write(patches)

    async def forget(self, scope: str) -> None:
        """Delete the held calls of a deleted session or response, a page at a time."""
        while True:
            found = await self._records.stored_page(parent="", where=("scope", scope), limit=FORGET_PAGE)
            await self.delete_ids([held.value.id for held in found.items])
            if not found.has_more:
                return

    async def delete_ids(self, approval_ids: Sequence[str]) -> None:
        """Delete these held calls (those that exist)."""
        if approval_ids:
            await self._kernel.write([ops.Delete(APPROVAL, i) for i in approval_ids])
