"""The audit API's service: who may list which audit records, and how long they are kept.

A record is owned by whoever acted, so under the default policy a caller reads
its own trail; an operator reads everyone's (unauthenticated refusals
included, which nobody owns) with a rule such as
``permit: {actions: [read], resource: "audit::*"}``. With authentication off,
every record is listed.

Records are kept ``audit.retention_days``: a task sweeps older ones at start (a
backlog never delays the server's start) and every ``audit.sweep_interval_seconds``,
``audit.sweep_batch_size`` per write. Each
replica sweeps; two sweeping at once only delete the same records twice.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ferryman.api.audit import AUDIT_ACTIONS, AUDIT_OUTCOMES, AuditRecordList
from ferryman.audit_settings import AuditSettings
from ferryman.auth.principal import Principal
from ferryman.errors import InvalidRequestError
from ferryman.periodic import Periodic
from ferryman.storage.domain.audit import AuditLog, AuditQuery
from ferryman.storage.domain.kinds import AUDIT
from ferryman.storage.kernel.protocol import Kernel

from .access import Access
from .audit_trail import AuditTrail

log = logging.getLogger(__name__)

SECONDS_PER_DAY = 86_400


class AuditService:
    """Lists audit records by the access policy, writes them through its trail and sweeps old ones.

    Args:
        kernel: Where the records are stored.
        access: The access policy.
        settings: The ``audit:`` settings.
    """

    def __init__(self, kernel: Kernel, access: Access, settings: AuditSettings | None = None) -> None:
        self.settings = settings or AuditSettings()
        self.records = AuditLog(kernel)
        self.trail = AuditTrail(self.records, self.settings)
        self._access = access
        self._sweeper = Periodic("audit-sweep", self._sweep_beat, self.settings.sweep_interval_seconds)
        self.swept = asyncio.Event()
        """Set once a sweep of the background task has ended (the first runs at start)."""

    async def list(
        self,
        who: Principal | None,
        *,
        principal: str | None = None,
        action: str | None = None,
        resource: str | None = None,
        outcome: str | None = None,
        since: float | None = None,
        after: str | None = None,
        limit: int = 20,
        order: str = "desc",
    ) -> AuditRecordList:
        """One page of the audit records ``who`` may read, newest first unless ``order`` is ``asc``.

        Raises:
            InvalidRequestError: ``action`` or ``outcome`` is none of the known ones.
            NotFoundError: ``after`` names no audit record.
        """
        if action is not None and action not in AUDIT_ACTIONS:
            raise InvalidRequestError(f"action must be one of {', '.join(AUDIT_ACTIONS)}", "action")
        if outcome is not None and outcome not in AUDIT_OUTCOMES:
            raise InvalidRequestError(f"outcome must be one of {', '.join(AUDIT_OUTCOMES)}", "outcome")
        query = AuditQuery(
            principal=principal, action=action, resource=resource, outcome=outcome, since=since,
            allow=self._access.filter(who, "read", AUDIT), after=after, limit=limit, desc=order != "asc",
            max_scan=self.settings.max_scan,
        )  # fmt: skip
        page = await self.records.page(query)
        first = page.items[0].id if page.items else None
        return AuditRecordList(data=page.items, first_id=first, last_id=page.cursor, has_more=page.has_more)

    async def sweep(self, now: float | None = None) -> int:
        """Delete the records older than ``audit.retention_days``, a bounded batch per write; how many."""
        cutoff = (time.time() if now is None else now) - self.settings.retention_days * SECONDS_PER_DAY
        deleted = 0
        while True:
            count = await self.records.sweep(cutoff, self.settings.sweep_batch_size)
            deleted += count
            if count < self.settings.sweep_batch_size:
                return deleted

    async def start(self) -> None:
        """Write records in the background, and sweep old ones: at once (in the background too), then periodically."""
        self.trail.start()
        self._sweeper.start()

    async def stop(self) -> None:
        """Stop sweeping; write the records still queued."""
        await self._sweeper.stop()
        await self.trail.stop()

    async def _sweep_beat(self) -> None:
        try:
            deleted = await self.sweep()
            if deleted:
                log.info("deleted %d audit records older than %d days", deleted, self.settings.retention_days)
        finally:  # a failure is logged by the loop, and tried again at its next beat
            self.swept.set()
