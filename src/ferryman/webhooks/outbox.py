"""The webhook outbox: one ``webhook_delivery`` record per event, leased by whichever replica posts it.

A delivery is written when its run's outcome is stored, with status ``pending``
and a lease that has already ended, so that the first replica to look claims it
(:meth:`Outbox.claim`, the kernel's ``claim_expired``: each record to one
caller across processes). The claim takes the record's lease for one attempt,
under a status naming the claim (``sending:<token>``); the attempt's outcome is
written only while that status holds, so a replica that stalled past its lease
never overwrites what another recorded since. A failed attempt leaves the record
``pending`` with its lease ending when the next attempt is due; a delivered or
given-up one keeps no lease, and is never claimed again. Nothing is held in
memory: a restart, or a replica's death, loses no delivery.

A run's delivery is also *armed* when the run starts (:meth:`Outbox.arm`, a
``webhook_arm`` record under the delivery's id) and disarmed in the same write
that queues its delivery. A process that dies between storing a run's outcome
and queueing its event leaves the arm; once its lease ends, a replica claims it
(:meth:`Outbox.claim_armed`) and asks the run's façade for the run's end.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from ferryman.api.webhooks import WebhookAttempt, WebhookDelivery
from ferryman.errors import ConflictError
from ferryman.storage.domain.kinds import WEBHOOK_ARM, WEBHOOK_DELIVERY
from ferryman.storage.domain.records import ModelCodec, Records, Stored
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.protocol import Kernel

PENDING = "pending"
SENDING = "sending:"
"""The prefix of a claimed delivery's status (the claim's token follows)."""
ID_PREFIX = "msg_"
SETTLED = {"target": "", "payload": ""}
"""What a delivered or failed delivery keeps of its URL and event."""


class StoredDelivery(WebhookDelivery):
    """A delivery as stored: what the API shows, and what only the server reads.

    Attributes:
        target: The webhook URL as the request named it (credentials in it included); emptied once the delivery
            is settled (delivered or failed).
        payload: The event's body, the exact JSON text every attempt posts and signs; emptied once settled.
        session_id: The session of the turn it tells of (deleting the session deletes it).
        claims: How many times a replica claimed it to make an attempt (one whose process crashed mid-attempt
            records none: counted here, it is given up all the same after ``webhooks.max_attempts``).
    """

    target: str
    payload: str
    session_id: str | None = None
    claims: int = 0

    def shown(self) -> WebhookDelivery:
        """The delivery as the API shows it (no target, no payload)."""
        return WebhookDelivery.model_validate(self.model_dump(exclude={"target", "payload", "session_id", "claims"}))


class ArmedRun(BaseModel):
    """A run whose end its webhook awaits, as armed when the run starts.

    Attributes:
        kind: Whose run: a turn of the Agents API, or a response.
        run_id: The turn's or response's id.
        run_key: Names the run (see :func:`delivery_id`).
        session_id: The turn's session (a turn's run).
    """

    kind: Literal["turn", "response"]
    run_id: str
    run_key: str
    session_id: str | None = None


@dataclass(frozen=True)
class Claimed:
    """A delivery this replica holds for one attempt: its record and the claim's token."""

    delivery: StoredDelivery
    token: str


def delivery_id(run_key: str) -> str:
    """The delivery id of one run's end (the same for the same run, so a second write of it is refused)."""
    return ID_PREFIX + hashlib.sha256(run_key.encode()).hexdigest()[:32]


class Outbox:
    """The deliveries, over a kernel.

    Args:
        kernel: The backend.
    """

    def __init__(self, kernel: Kernel) -> None:
        self.records: Records[StoredDelivery] = Records(
            kernel, WEBHOOK_DELIVERY, ModelCodec(StoredDelivery), lambda d: d.id
        )
        self.armed: Records[ArmedRun] = Records(
            kernel, WEBHOOK_ARM, ModelCodec(ArmedRun), lambda run: delivery_id(run.run_key)
        )
        self.kernel = kernel

    async def arm(self, run: ArmedRun, check_at: float) -> None:
        """Arm the delivery of ``run``'s end, to be looked for at ``check_at`` should the run's end not queue it."""
        put = ops.Put(WEBHOOK_ARM, delivery_id(run.run_key), ModelCodec(ArmedRun).dump(run), lease_until=check_at)
        try:
            await self.kernel.write([put])
        except ConflictError:  # armed already (the same run started twice is one run)
            pass

    async def claim_armed(self, now: float, hold_seconds: float, limit: int) -> list[ArmedRun]:
        """Take up to ``limit`` armed runs whose check is due, for ``hold_seconds``."""
        recs = await self.kernel.claim_expired(
            WEBHOOK_ARM, now, status=None, lease_until=now + hold_seconds, limit=limit
        )
        return [self.armed.stored(rec).value for rec in recs]

    async def rearm(self, run: ArmedRun, check_at: float) -> None:
        """Look for ``run``'s end again at ``check_at`` (it is still going)."""
        patch = ops.Patch(WEBHOOK_ARM, delivery_id(run.run_key), lease_until=check_at, required=False)
        await self.kernel.write([patch])

    async def disarm(self, run: ArmedRun) -> None:
        """Forget ``run``'s arm (its end is queued, or nothing is left to tell of it)."""
        await self.kernel.write([ops.Delete(WEBHOOK_ARM, delivery_id(run.run_key))])

    async def add(self, delivery: StoredDelivery, owner: Owner | None) -> bool:
        """Queue a delivery, due at once (or store it settled, when it is not ``pending``); whether it is new.

        A delivery whose id is stored already (the same run's end, written twice) is left as it is.
        """
        due = delivery.created_at if delivery.status == PENDING else None
        put = ops.Put(
            WEBHOOK_DELIVERY,
            delivery.id,
            ModelCodec(StoredDelivery).dump(delivery),
            owner=owner,
            status=delivery.status,
            lease_until=due,
            at=delivery.created_at,
        )
        disarm = ops.Delete(WEBHOOK_ARM, delivery.id)
        try:
            await self.kernel.write([put, disarm])
        except ConflictError:
            await self.kernel.write([disarm])
            return False
        return True

    async def claim(self, now: float, hold_seconds: float, limit: int) -> list[Claimed]:
        """Take up to ``limit`` deliveries due before ``now`` (or whose holder's lease lapsed) for one attempt."""
        token = secrets.token_hex(8)
        recs = await self.kernel.claim_expired(
            WEBHOOK_DELIVERY, now, status=SENDING + token, lease_until=now + hold_seconds, limit=limit
        )
        return [Claimed(self.records.stored(rec).value, token) for rec in recs]

    async def settle(self, claimed: Claimed, attempt: WebhookAttempt, next_at: float | None, give_up: bool) -> bool:
        """Record an attempt: delivered (no error), due again at ``next_at``, or failed for good (``give_up``).

        Returns:
            Whether it was recorded (False: the claim lapsed and another replica holds the delivery now).
        """
        delivery = claimed.delivery
        attempts = [*delivery.attempts, attempt]
        drop: tuple[str, ...] = ("next_attempt_at",)
        # A settled delivery keeps no content: the event may hold what its run's caller later deletes.
        if attempt.error is None:
            status, merge = "delivered", {"status": "delivered", "delivered_at": attempt.at, **SETTLED}
        elif give_up or next_at is None:
            status, merge = "failed", {"status": "failed", **SETTLED}
        else:
            status, merge, drop = PENDING, {"status": PENDING, "next_attempt_at": next_at}, ()
        patch = ops.Patch(
            WEBHOOK_DELIVERY,
            delivery.id,
            merge={**merge, "attempts": [a.model_dump(mode="json", exclude_none=True) for a in attempts]},
            drop=drop,
            status=status,
            lease_until=next_at if status == PENDING else None,
            expect_status=frozenset({SENDING + claimed.token}),
            required=False,
        )
        (changed,) = await self.kernel.write([patch])
        return bool(changed)

    async def count_claim(self, claimed: Claimed) -> None:
        """Count the claim of an attempt about to be made (before it is: a crash during it counts)."""
        patch = ops.Patch(
            WEBHOOK_DELIVERY,
            claimed.delivery.id,
            merge={"claims": claimed.delivery.claims + 1},
            expect_status=frozenset({SENDING + claimed.token}),
            required=False,
        )
        await self.kernel.write([patch])

    async def release(self, claimed: Claimed) -> None:
        """Hand a claimed delivery back unattempted (the server stops): due again at once, for any replica."""
        patch = ops.Patch(
            WEBHOOK_DELIVERY,
            claimed.delivery.id,
            merge={"claims": claimed.delivery.claims},  # unattempted: this claim does not count
            status=PENDING,
            lease_until=time.time(),
            expect_status=frozenset({SENDING + claimed.token}),
            required=False,
        )
        await self.kernel.write([patch])

    async def sweep(self, until: float, batch: int) -> int:
        """Delete at most ``batch`` of the oldest deliveries made before ``until``, in one write; how many."""
        (found,) = await self.kernel.read([ops.Page(WEBHOOK_DELIVERY, until=until, limit=batch)])
        if found.items:
            await self.kernel.write([ops.Delete(WEBHOOK_DELIVERY, rec.id) for rec in found.items])
        return len(found.items)

    async def forget(self, field: str, value: str, batch: int) -> None:
        """Delete every delivery whose ``field`` (``run_id`` or ``session_id``) is ``value``, ``batch`` a write."""
        while True:
            (found,) = await self.kernel.read([ops.Page(WEBHOOK_DELIVERY, where=(field, value), limit=batch)])
            if not found.items:
                return
            await self.kernel.write([ops.Delete(WEBHOOK_DELIVERY, rec.id) for rec in found.items])

    async def find(self, record_id: str) -> Stored[StoredDelivery] | None:
        """A delivery, whoever owns it."""
        return await self.records.find(record_id)
