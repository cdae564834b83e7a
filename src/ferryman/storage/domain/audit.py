"""Audit records as records of the kernel: written in batches, listed with filters, swept when old.

An audit record is one record of kind :data:`~.kinds.AUDIT`, its body the wire
model's dump, its owner whoever acted (so an access filter decides who reads
it), its creation time the moment it happened. Nothing here is backend code.

A listing uses at most one index: the kernel answers one equality on a declared
index (``resource``, else ``principal``, else ``outcome``), the creation-time
bound and the caller's access filter; the other filters are applied to the
records as they are read, and a page stops after examining a bounded number of
them (:class:`AuditQuery`'s ``max_scan``), telling so with ``has_more`` and a
cursor past what it examined.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ferryman.api.audit import AuditRecord
from ferryman.storage.domain.kinds import AUDIT
from ferryman.storage.domain.records import ModelCodec, Records
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.filters import ALL, Filter
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.protocol import Kernel

INDEXED = ("resource", "principal", "outcome")
"""The filters an index answers, most selective first: a query uses the first it has."""
SCAN_STEP = 100
"""How many records one read of a filtered page fetches."""


@dataclass(frozen=True)
class AuditQuery:
    """What a listing of audit records asks for.

    Attributes:
        principal: Only records of this principal (qualified: ``key:NAME``, ``sub:ID``).
        action: Only records of this action.
        resource: Only records of this resource (``type::id``, as stored: escaped).
        outcome: Only ``allowed`` or only ``denied`` records.
        since: Only records made at or after this time (seconds since the epoch).
        allow: The records the caller may read (its access filter).
        after: The cursor: the id where the previous page ended.
        limit: The most records returned.
        desc: Newest first (the default), else oldest first.
        max_scan: The most records examined for the filters no index answers.
    """

    principal: str | None = None
    action: str | None = None
    resource: str | None = None
    outcome: str | None = None
    since: float | None = None
    allow: Filter = ALL
    after: str | None = None
    limit: int = 20
    desc: bool = True
    max_scan: int = 1000

    def indexed(self) -> tuple[str, str] | None:
        """The equality the kernel answers from an index: the most selective filter given."""
        for name in INDEXED:
            value = getattr(self, name)
            if value is not None:
                return (name, value)
        return None

    def scans(self) -> bool:
        """Whether a filter is left that no index answers (the page is then read in bounded steps)."""
        given = [name for name in (*INDEXED, "action") if getattr(self, name) is not None]
        return len(given) > 1 or given == ["action"]

    def matches(self, record: AuditRecord) -> bool:
        """Whether a record passes every filter (those the index answered too)."""
        return all(getattr(self, name) in (None, getattr(record, name)) for name in (*INDEXED, "action"))


@dataclass(frozen=True)
class AuditPage:
    """A page of audit records, whether more may follow, and where the next page starts.

    Attributes:
        items: The records.
        has_more: Whether records remain to examine after ``cursor`` (with filters no index answers, they may
            all fail them: the next page is then empty, with ``has_more`` false).
        cursor: The id of the last record examined (None: none was).
    """

    items: list[AuditRecord]
    has_more: bool
    cursor: str | None


class AuditLog:
    """The audit records of one kernel.

    Args:
        kernel: The backend.
    """

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.records = Records(kernel, AUDIT, ModelCodec(AuditRecord), lambda record: record.id)

    async def write(self, entries: Sequence[tuple[AuditRecord, Owner | None]]) -> None:
        """Store records, each with its owner and its own time as creation time, in one write."""
        puts = [self.records.put(record, owner=owner, at=record.created_at) for record, owner in entries]
        await self.kernel.write(puts)

    async def page(self, query: AuditQuery) -> AuditPage:
        """A page of the records ``query`` asks for (see the module's description of how it is bounded)."""
        where = query.indexed()
        if query.scans():
            return await self._scanned(query, where)
        found = await self.records.page(
            allow=query.allow, where=where, after=query.after, limit=query.limit, desc=query.desc, since=query.since
        )
        return AuditPage(found.items, found.has_more, found.items[-1].id if found.items else None)

    async def _scanned(self, query: AuditQuery, where: tuple[str, str] | None) -> AuditPage:
        """Read in steps, keeping what passes the other filters, until one more than a page or the scan bound."""
        kept: list[AuditRecord] = []
        cursor, scanned, more = query.after, 0, True
        while more and scanned < query.max_scan and len(kept) <= query.limit:
            found = await self.records.page(
                allow=query.allow, where=where, after=cursor, limit=min(SCAN_STEP, query.max_scan - scanned),
                desc=query.desc, since=query.since,
            )  # fmt: skip
            more = found.has_more
            for record in found.items:
                scanned, cursor = scanned + 1, record.id
                if query.matches(record):
                    kept.append(record)
                    if len(kept) > query.limit:
                        break
        if len(kept) > query.limit:
            items = kept[: query.limit]
            return AuditPage(items, True, items[-1].id)
        return AuditPage(kept, more, cursor)

    async def sweep(self, until: float, batch: int) -> int:
        """Delete at most ``batch`` of the oldest records made before ``until``, in one write; how many."""
        (found,) = await self.kernel.read([ops.Page(AUDIT, until=until, limit=batch)])
        if not found.items:
            return 0
        await self.kernel.write([ops.Delete(AUDIT, rec.id) for rec in found.items])
        return len(found.items)
