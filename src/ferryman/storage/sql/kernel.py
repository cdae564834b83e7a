"""The storage kernel on SQL (SQLite, PostgreSQL): one set of SQLAlchemy Core statements, today's drivers.

A write batch is one unit of work, so one transaction (on SQLite, one hop to the writer thread); each
operation's statements run in order inside it, so later operations see earlier ones, and a failed one rolls
the whole batch back. A read batch of several operations reads one snapshot (a read-only transaction); a
single operation needs none. Statements are compiled once per dialect (see :mod:`.dialects`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ferryman.api.limits import MAX_MESSAGES
from ferryman.storage.kernel.model import Kind, Rec, Schema
from ferryman.storage.kernel.ops import Delete, Op, Put, ReadOp
from ferryman.storage.sql import kernel_statements as st
from ferryman.storage.sql.dialects import SqlDialect
from ferryman.storage.sql.kernel_reads import READS, record, run
from ferryman.storage.sql.kernel_writes import WRITES, claim_rows, delete, put, put_many, shared_puts, shares_children
from ferryman.storage.sql.seam import Driver, Query, Work

MAX_BATCH = 10 * MAX_MESSAGES
"""Most operations one ``write`` or ``read`` takes: many times what a write of a request's items holds (at most
``MAX_MESSAGES`` of them, the records written with them, a finished response's output beside its input)."""
MAX_CLAIM = 1000
"""Most records one ``claim_expired`` takes."""


def _limit(count: int, most: int, what: str) -> None:
    if count > most:
        raise ValueError(f"{what} takes at most {most} at a time, not {count}")


class SqlKernel:
    """A :class:`~ferryman.storage.kernel.protocol.Kernel` on a SQLite or PostgreSQL driver.

    Args:
        driver: A ``SqliteDriver`` or ``PostgresDriver`` (opening it migrates the schema to head), or a
            function making a fresh one (a kernel may then be opened again after ``close``).
        schema: The kinds it stores.
    """

    def __init__(self, driver: Driver | Callable[[], Driver], schema: Schema) -> None:
        self._make: Callable[[], Driver] | None = driver if callable(driver) and not _is_driver(driver) else None
        self.driver: Driver = self._make() if self._make is not None else driver  # type: ignore[assignment]
        self.schema = schema
        self._closed = False
        # Kinds whose deletes look up what lies below by parent id (a kind below has several parent kinds).
        self._walked = {kind.name for kind in schema.kinds.values() if shares_children(schema, kind)}

    @property
    def dialect(self) -> SqlDialect:
        """The driver's dialect: how the statements are written and compiled."""
        return self.driver.dialect

    async def open(self) -> None:
        """Open the driver (which brings the schema up to date)."""
        if self._closed and self._make is not None:
            self.driver = self._make()
        self._closed = False
        await self.driver.open()

    async def close(self) -> None:
        """Close the driver."""
        self._closed = True
        await self.driver.close()

    def _unit(self, op: Op) -> Work[Any]:
        if isinstance(op, Put):
            return put(self.dialect, op, self._parent_noun(op))
        if isinstance(op, Delete) and op.kind.name in self._walked:
            return delete(self.dialect, op, self.schema)
        handler = WRITES.get(type(op)) or READS.get(type(op))
        if handler is None:
            raise TypeError(f"not a kernel operation: {op!r}")
        return handler(self.dialect, op)  # type: ignore[no-any-return]

    def _batch(self, ops: Sequence[Op]) -> Work[list[Any]]:
        results: list[Any] = []
        at = 0
        while at < len(ops):
            puts = shared_puts(ops, at)
            if puts:  # written together: a conversation's items, say
                results += yield from put_many(self.dialect, puts, self._parent_noun(puts[0]))
                at += len(puts)
                continue
            result = yield from self._unit(ops[at])
            results.append(result)
            at += 1
        return results

    def _parent_noun(self, op: Put) -> str:
        parents = op.kind.parents
        return self.schema[parents[0]].noun if parents else "parent"

    def _snapshot(self, ops: Sequence[Op]) -> Work[list[Any]]:
        yield Query(self.dialect.begin_snapshot, {}, "all")
        try:
            results = yield from self._batch(ops)
        except Exception:
            yield Query("ROLLBACK", {}, "all")
            raise
        yield Query("COMMIT", {}, "all")
        return results

    async def write(self, ops: Sequence[Op]) -> list[Any]:
        """Run a batch in one transaction; one result per operation (see :mod:`ferryman.storage.kernel.ops`)."""
        _limit(len(ops), MAX_BATCH, "a write batch")
        self.schema.require(ops)
        if not ops:
            return []
        return await self.driver.write(self._batch(ops))

    async def read(self, ops: Sequence[ReadOp]) -> list[Any]:
        """Run read operations; several read one snapshot."""
        self._check_reads(ops)
        if not ops:
            return []
        return await self.driver.read(self._snapshot(ops) if len(ops) > 1 else self._batch(ops))

    def reads_within(self, ops: Sequence[ReadOp]) -> Work[list[Any]]:
        """Read operations as statements of another unit of work on the same driver (its transaction, its trip)."""
        self._check_reads(ops)
        return self._batch(ops)

    def writes_within(self, ops: Sequence[Op]) -> Work[list[Any]]:
        """A write batch as statements of another unit of work on the same driver: its records are written in
        that unit's transaction, with whatever else it writes."""
        _limit(len(ops), MAX_BATCH, "a write batch")
        self.schema.require(ops)
        return self._batch(ops)

    def _check_reads(self, ops: Sequence[ReadOp]) -> None:
        _limit(len(ops), MAX_BATCH, "a read batch")
        for op in ops:
            if type(op) not in READS:
                raise TypeError(f"read() takes read operations only, not {type(op).__name__}")
        self.schema.require(ops)

    async def renew(self, kind: Kind, ids: Sequence[str], until: float) -> list[str]:
        """Move the leases of those records that hold one to ``until``; the ids renewed, in the order given."""
        _limit(len(ids), MAX_CLAIM, "renew")
        if not ids:
            return []
        d = self.dialect
        rows = await self.driver.write(run(st.renew(d), "all", kind=kind.name, ids=d.array(ids), until=until))
        renewed = {row[0] for row in rows}
        return [record_id for record_id in ids if record_id in renewed]

    async def claim_expired(
        self, kind: Kind, now: float, *, status: str | None, lease_until: float | None, limit: int
    ) -> list[Rec]:
        """Take up to ``limit`` records whose lease ended before ``now``, oldest first; each to one caller.

        PostgreSQL's sweepers skip the rows another has locked (``SKIP LOCKED``); SQLite's writer is alone.
        """
        _limit(limit, MAX_CLAIM, "claim_expired")
        if limit <= 0:
            return []
        return await self.driver.write(self._claim(kind, now, status, lease_until, limit))

    def _claim(
        self, kind: Kind, now: float, status: str | None, lease_until: float | None, limit: int
    ) -> Work[list[Rec]]:
        claimed: list[Rec] = []
        after = 0
        while len(claimed) < limit:
            want = limit - len(claimed)
            rows = yield run(st.expired(self.dialect), "all", kind=kind.name, now=now, after_seq=after, limit=want)
            if not rows:
                break
            found = [record(row) for row in rows]
            after = found[-1].seq
            claimed += yield from claim_rows(self.dialect, kind, found, status, lease_until, want)
            if len(rows) < want:
                break
        return claimed


def _is_driver(value: object) -> bool:
    return hasattr(value, "write") and hasattr(value, "read")
