"""The sink of audit records: queued on the request's path, written in batches by a background task.

:func:`ferryman.auth.audit.audit` runs synchronously wherever a create, a
delete or a denial happens; a storage write there would add a round trip to
the request. :meth:`AuditTrail.submit` only appends to a bounded queue (when it
is full the record is dropped, counted and warned about: a slow database never
slows requests down, nor grows memory without bound); a task writes what
waits, one kernel write per batch, every ``flush_interval_seconds`` (at once
when a batch is full), and everything left when the app stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque

from ferryman.api.audit import AuditRecord
from ferryman.audit_settings import AuditSettings
from ferryman.auth.audit import AuditEntry, bounded_text
from ferryman.auth.filters import owner_of
from ferryman.ids import new_id
from ferryman.storage.domain.audit import AuditLog
from ferryman.storage.kernel.model import Owner

log = logging.getLogger(__name__)


def record_of(entry: AuditEntry) -> tuple[AuditRecord, Owner | None]:
    """The record stored for an entry, and its owner (whoever acted): every caller's text escaped and bounded."""
    principal = entry.principal
    record = AuditRecord(
        id=new_id("audit"),
        created_at=entry.at,
        request_id=entry.request_id,
        principal=None if principal is None else bounded_text(principal.qualified),
        event=entry.event,
        action=entry.action,
        resource=bounded_text(entry.resource),
        outcome="allowed" if entry.outcome == "allowed" else "denied",
        status=entry.status,
        route=None if entry.route is None else bounded_text(entry.route),
        reason=None if entry.reason is None else bounded_text(entry.reason),
    )
    return record, owner_of(principal)


class AuditTrail:
    """Queues audit entries and writes them in batches (an :class:`~ferryman.auth.audit.AuditSink`).

    Args:
        records: Where they are stored.
        settings: The queue's size, the batch size and how often a batch is written.
    """

    def __init__(self, records: AuditLog, settings: AuditSettings) -> None:
        self._records = records
        self._settings = settings
        self._queue: deque[AuditEntry] = deque()
        self._full = asyncio.Event()
        self._writing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._dropped_since_warning = 0
        self.dropped = 0
        """How many entries were dropped since the trail was made (queue full, or their write failed)."""

    def submit(self, entry: AuditEntry) -> None:
        """Queue an entry (never waits); drop it, counted, when ``audit.queue_size`` entries already wait."""
        if len(self._queue) >= self._settings.queue_size:
            self.dropped += 1
            self._dropped_since_warning += 1
            if self._dropped_since_warning == 1:
                log.warning(
                    "audit queue full (audit.queue_size=%d): records are dropped until it drains",
                    self._settings.queue_size,
                )
            return
        self._queue.append(entry)
        if len(self._queue) >= self._settings.batch_size:
            self._full.set()

    @property
    def waiting(self) -> int:
        """How many entries wait to be written."""
        return len(self._queue)

    async def flush(self) -> None:
        """Write every entry queued so far, a batch per write."""
        async with self._writing:
            while self._queue:
                count = min(len(self._queue), self._settings.batch_size)
                batch = [self._queue.popleft() for _ in range(count)]
                try:
                    await self._records.write([record_of(entry) for entry in batch])
                except Exception:  # a write that failed must not stop the trail: later records still go
                    self.dropped += count
                    log.exception("could not store %d audit records: they are lost (still in the log)", count)
            if self._dropped_since_warning:
                log.warning("%d audit records were dropped: the queue was full", self._dropped_since_warning)
                self._dropped_since_warning = 0

    def start(self) -> None:
        """Write queued entries in the background from now on."""
        if self._task is None:
            self._stopping = False
            self._task = asyncio.create_task(self._run(), name="audit-trail")

    async def stop(self) -> None:
        """Stop the background task (letting a write it began end), then write what is left."""
        if self._task is not None:
            self._stopping = True
            self._full.set()
            await self._task
            self._task = None
        await self.flush()

    async def _run(self) -> None:
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._full.wait(), self._settings.flush_interval_seconds)
            self._full.clear()
            if not self._stopping:
                await self.flush()
