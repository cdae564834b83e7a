"""The in-memory kernel: the executable specification of :class:`~.protocol.Kernel`, and the unit tests' store.

Simple over fast. State is two dicts of immutable values (records and logs),
so a batch runs on a shallow copy and, only when every
operation succeeded, the copy replaces the state: a failed batch leaves nothing.
Nothing here awaits, so under asyncio each call runs whole, one at a time.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ferryman.errors import ConflictError, ForbiddenError, NotFoundError
from ferryman.storage.kernel.filters import Filter, admits
from ferryman.storage.kernel.model import Kind, LogEntry, PageOf, Rec, Schema, owner_terms
from ferryman.storage.kernel.ops import (
    KEEP,
    Append,
    Chain,
    Check,
    CountStatus,
    Delete,
    Events,
    Get,
    GetMany,
    History,
    LogCount,
    Op,
    Page,
    Patch,
    Put,
    ReadOp,
    Rewrite,
)

_READS = (Get, GetMany, Page, CountStatus, Events, LogCount, History, Chain)


@dataclass
class _State:
    """Everything stored. Values are never changed in place (records and log tuples are replaced)."""

    records: dict[tuple[str, str], Rec]
    logs: dict[tuple[str, str, str], tuple[str, ...]]
    seq: int = 0

    def snapshot(self) -> _State:
        return _State(dict(self.records), dict(self.logs), self.seq)

    def of_kind(self, kind: str) -> list[Rec]:
        """The records of ``kind`` in creation order."""
        return sorted((rec for (name, _), rec in self.records.items() if name == kind), key=lambda rec: rec.seq)


def _out(rec: Rec) -> Rec:
    """A record as handed out: its body a copy, so a caller's change cannot reach the store."""
    return replace(rec, body=copy.deepcopy(rec.body))


def _allowed(flt: Filter, rec: Rec) -> bool:
    return admits(flt, owner_terms(rec.owner), rec.id)


def _not_found(kind: Kind, record_id: str) -> NotFoundError:
    return NotFoundError(f"{kind.noun} '{record_id}' not found")


class _Run:
    """Operations applied, in order, to one state."""

    def __init__(self, schema: Schema, state: _State) -> None:
        self.schema = schema
        self.state = state
        self.handlers: dict[type, Callable[[Any], Any]] = {
            Check: self.check,
            Put: self.put,
            Patch: self.patch,
            Delete: self.delete,
            Append: self.append,
            Rewrite: self.rewrite,
            Get: self.get,
            GetMany: self.get_many,
            Page: self.page,
            CountStatus: self.count_status,
            Events: self.events,
            LogCount: self.log_count,
            History: self.history,
            Chain: self.chain,
        }

    def run(self, op: Op) -> Any:
        handler = self.handlers.get(type(op))
        if handler is None:
            raise TypeError(f"not a kernel operation: {op!r}")
        return handler(op)

    def _rec(self, kind: Kind, record_id: str) -> Rec | None:
        return self.state.records.get((kind.name, record_id))

    # -- writes ----------------------------------------------------------------------------------------------

    def check(self, op: Check) -> None:
        rec = self._rec(op.kind, op.id)
        if rec is None or (op.parent is not None and rec.parent != op.parent) or not _allowed(op.read, rec):
            raise _not_found(op.kind, op.id)
        if not _allowed(op.act, rec):
            raise ForbiddenError(f"not allowed on {op.kind.noun} '{op.id}'")

    def put(self, op: Put) -> int:
        if op.parent and not any((name, op.parent) in self.state.records for name in op.kind.parents):
            noun = self.schema[op.kind.parents[0]].noun if op.kind.parents else "parent"
            raise NotFoundError(f"{noun} '{op.parent}' not found")
        old = self._rec(op.kind, op.id)
        if old is not None and op.mode == "create":
            raise ConflictError(f"{op.kind.noun} '{op.id}' already exists")
        body = copy.deepcopy(op.body)
        if old is not None:
            new = replace(old, body=body, status=op.status, lease_until=op.lease_until)
        else:
            self.state.seq += 1
            at = time.time() if op.at is None else op.at
            new = Rec(op.kind.name, op.id, op.parent, self.state.seq, at, op.owner, body, op.status, op.lease_until)
        self.hold_slot(op.kind, new)
        self.state.records[(op.kind.name, op.id)] = new
        return new.seq

    def hold_slot(self, kind: Kind, rec: Rec) -> None:
        """Refuse ``rec`` an exclusive status another record of its parent holds."""
        if rec.status not in kind.exclusive:
            return
        for other in self.state.of_kind(kind.name):
            if other.id != rec.id and other.parent == rec.parent and other.status in kind.exclusive:
                raise ConflictError(f"{kind.noun} '{other.id}' is {other.status} in '{rec.parent}'")

    def patch(self, op: Patch) -> bool:
        rec = self._rec(op.kind, op.id)
        if rec is None:
            if op.required:
                raise _not_found(op.kind, op.id)
            return False
        if op.expect_status is not None and rec.status not in op.expect_status:
            if op.required:
                raise ConflictError(f"{op.kind.noun} '{op.id}' is {rec.status}, not {sorted(op.expect_status)}")
            return False
        body = copy.deepcopy(rec.body)
        body.update(copy.deepcopy(op.merge or {}))
        for name in op.drop:
            body.pop(name, None)
        status = rec.status if op.status is KEEP else op.status
        lease_until = rec.lease_until if op.lease_until is KEEP else op.lease_until
        new = replace(rec, body=body, status=status, lease_until=lease_until)
        self.hold_slot(op.kind, new)
        self.state.records[(op.kind.name, op.id)] = new
        return True

    def delete(self, op: Delete) -> bool:
        if self._rec(op.kind, op.id) is None:
            return False
        self._delete_tree(op.kind, op.id)
        return True

    def _delete_tree(self, kind: Kind, record_id: str) -> None:
        for child_kind in self.schema.children(kind):
            for child in self.state.of_kind(child_kind.name):
                if child.parent == record_id:
                    self._delete_tree(child_kind, child.id)
        self.state.records.pop((kind.name, record_id), None)
        for channel in kind.logs:
            self.state.logs.pop((kind.name, record_id, channel), None)

    def _log(self, kind: Kind, record_id: str, channel: str) -> tuple[str, str, str]:
        if channel not in kind.logs:
            raise ValueError(f"kind {kind.name!r} has no log {channel!r}")
        if self._rec(kind, record_id) is None:
            raise _not_found(kind, record_id)
        return (kind.name, record_id, channel)

    def append(self, op: Append) -> int:
        where = self._log(op.kind, op.id, op.channel)
        old = self.state.logs.get(where, ())
        self.state.logs[where] = old + tuple(op.entries)
        return len(old)

    def rewrite(self, op: Rewrite) -> int:
        where = self._log(op.kind, op.id, op.channel)
        self.state.logs[where] = tuple(op.entries)
        return len(op.entries)

    # -- reads -----------------------------------------------------------------------------------------------

    def get(self, op: Get) -> Rec | None:
        rec = self._rec(op.kind, op.id)
        if rec is None or (op.parent is not None and rec.parent != op.parent) or not _allowed(op.allow, rec):
            return None
        return _out(rec)

    def get_many(self, op: GetMany) -> list[Rec]:
        found = (self._rec(op.kind, record_id) for record_id in op.ids)
        return [_out(rec) for rec in found if rec is not None]

    def _matching(self, kind: Kind, parent: str | None, where: tuple[str, str] | None) -> Iterator[Rec]:
        slot = None if where is None else kind.index_slot(where[0])
        for rec in self.state.of_kind(kind.name):
            if parent is not None and rec.parent != parent:
                continue
            if slot is not None and where is not None and kind.index_values(rec.body)[slot] != where[1]:
                continue
            yield rec

    def page(self, op: Page) -> PageOf[Rec]:
        if op.after is not None and self._rec(op.kind, op.after) is None:
            raise _not_found(op.kind, op.after)
        mark = None if op.after is None else self.state.records[(op.kind.name, op.after)].seq
        found = [
            rec
            for rec in self._matching(op.kind, op.parent, op.where)
            if _allowed(op.allow, rec)
            and (op.statuses is None or rec.status in op.statuses)
            and (op.since is None or rec.at >= op.since)
            and (op.until is None or rec.at < op.until)
        ]
        if op.desc:
            found.reverse()
        if mark is not None:
            found = [rec for rec in found if (rec.seq < mark if op.desc else rec.seq > mark)]
        found = found[op.offset :]
        if op.limit is None:
            return PageOf([_out(rec) for rec in found], False)
        return PageOf([_out(rec) for rec in found[: op.limit]], len(found) > op.limit)

    def count_status(self, op: CountStatus) -> dict[str, int]:
        counts: dict[str, int] = {}
        for rec in self._matching(op.kind, op.parent, op.where):
            if rec.status is not None:
                counts[rec.status] = counts.get(rec.status, 0) + 1
        return counts

    def events(self, op: Events) -> list[LogEntry]:
        entries = self.state.logs.get((op.kind.name, op.id, op.channel), ())
        found = [LogEntry(n, body) for n, body in enumerate(entries) if n > op.after]
        return found if op.limit is None else found[: op.limit]

    def log_count(self, op: LogCount) -> int:
        return len(self.state.logs.get((op.kind.name, op.id, op.channel), ()))

    def history(self, op: History) -> list[tuple[str, LogEntry]]:
        records = list(self._matching(op.kind, op.parent, None))
        if op.through is not None:
            ids = [rec.id for rec in records]
            records = records[: ids.index(op.through) + 1] if op.through in ids else []
        found: list[tuple[str, LogEntry]] = []
        for rec in records:
            if rec.status in op.statuses or rec.id == op.through:
                entries = self.state.logs.get((op.kind.name, rec.id, op.channel), ())
                found.extend((rec.id, LogEntry(n, body)) for n, body in enumerate(entries))
        return found

    def chain(self, op: Chain) -> list[Rec]:
        slot = op.kind.index_slot(op.via)
        found: list[Rec] = []
        rec = self._rec(op.kind, op.id)
        while rec is not None and len(found) < op.limit:
            found.append(_out(rec))
            pointer = op.kind.index_values(rec.body)[slot]
            rec = None if pointer is None else self._rec(op.kind, pointer)
        return found


class MemoryKernel:
    """A :class:`~.protocol.Kernel` kept in this process's memory (lost when it ends).

    Args:
        schema: The kinds it stores.
    """

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self._state = _State({}, {})

    async def open(self) -> None:
        """Nothing to connect to; the state survives ``close`` and ``open``, as a database's would."""

    async def close(self) -> None:
        """Nothing to release."""

    async def write(self, ops: Sequence[Op]) -> list[Any]:
        """Run a batch on a copy of the state and keep the copy only if every operation succeeded."""
        self.schema.require(ops)
        work = self._state.snapshot()
        run = _Run(self.schema, work)
        results = [run.run(op) for op in ops]
        self._state = work
        return results

    async def read(self, ops: Sequence[ReadOp]) -> list[Any]:
        """Run read operations on the current state."""
        for op in ops:
            if not isinstance(op, _READS):
                raise TypeError(f"read() takes read operations only, not {type(op).__name__}")
        self.schema.require(ops)
        run = _Run(self.schema, self._state)
        return [run.run(op) for op in ops]

    async def renew(self, kind: Kind, ids: Sequence[str], until: float) -> list[str]:
        """Move the lease of each listed record that holds one to ``until``."""
        renewed: list[str] = []
        for record_id in ids:
            rec = self._state.records.get((kind.name, record_id))
            if rec is not None and rec.lease_until is not None:
                self._state.records[(kind.name, record_id)] = replace(rec, lease_until=until)
                renewed.append(record_id)
        return renewed

    async def claim_expired(
        self, kind: Kind, now: float, *, status: str | None, lease_until: float | None, limit: int
    ) -> list[Rec]:
        """Take up to ``limit`` records whose lease ended before ``now``, oldest first.

        A record whose new status would take an exclusive slot another record holds is left unclaimed.
        """
        work = self._state.snapshot()
        run = _Run(self.schema, work)
        claimed: list[Rec] = []
        for rec in work.of_kind(kind.name):
            if len(claimed) >= limit:
                break
            if rec.lease_until is None or rec.lease_until >= now:
                continue
            new = replace(rec, status=rec.status if status is None else status, lease_until=lease_until)
            try:
                run.hold_slot(kind, new)
            except ConflictError:
                continue
            work.records[(kind.name, rec.id)] = new
            claimed.append(_out(rec))
        self._state = work
        return claimed
