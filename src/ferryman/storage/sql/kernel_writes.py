"""The SQL kernel's write operations, each a unit of work run inside the batch's one transaction.

A failed precondition raises, and the driver rolls the whole batch back. On PostgreSQL, rows a write reads
before changing are locked (``FOR NO KEY UPDATE``): a compare-and-set waits for a concurrent one, then sees its
result.
Constraint violations are never continued past (they abort a PostgreSQL transaction): where one is expected
(an id taken, a slot held) a statement checks first or ``ON CONFLICT`` answers it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ferryman.errors import ConflictError, ForbiddenError, NotFoundError
from ferryman.storage.kernel.filters import admits
from ferryman.storage.kernel.model import Json, Kind, Rec, Schema, owner_terms
from ferryman.storage.kernel.ops import KEEP, Append, Check, Delete, Op, Patch, Put, Rewrite
from ferryman.storage.sql import kernel_statements as st
from ferryman.storage.sql.dialects import SqlDialect
from ferryman.storage.sql.kernel_reads import not_found, record, run, run_each, visible
from ferryman.storage.sql.seam import ForeignKeyViolation, Query, UniqueViolation, Work

PUT_ROWS = 50
"""Rows of one statement of :func:`put_many`: fourteen parameters each, under every driver's limit."""


def _dump(body: Json) -> str:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def _slot(kind: Kind, status: str | None, parent: str) -> str | None:
    return parent if status in kind.exclusive else None


def _row_values(
    kind: Kind, body: Json, status: str | None, lease_until: float | None, slot: str | None
) -> dict[str, Any]:
    k1, k2, k3 = kind.index_values(body)
    return {
        "body": _dump(body),
        "status": status,
        "lease_until": lease_until,
        "k1": k1,
        "k2": k2,
        "k3": k3,
        "slot": slot,
    }


def free_slot(d: SqlDialect, kind: Kind, record_id: str, slot: str | None) -> Work[None]:
    """Raise ``ConflictError`` when another record of ``kind`` holds ``slot`` (None: nothing to hold)."""
    if slot is None:
        return
    holder = yield run(st.slot_holder(d), "one", kind=kind.name, slot=slot, id=record_id)
    if holder is not None:
        other, status = holder
        raise ConflictError(f"{kind.noun} '{other}' is {status} in '{slot}'")


def _slot_race(kind: Kind, slot: str | None) -> ConflictError:
    # Another transaction took the slot between the check and the write (PostgreSQL only).
    return ConflictError(f"another {kind.noun} holds '{slot}'")


def check(d: SqlDialect, op: Check) -> Work[None]:
    """Require a record the caller may read, then act on."""
    row = yield run(st.get_record(d), "one", kind=op.kind.name, id=op.id)
    rec = None if row is None else record(row)
    if rec is None or not visible(rec, op.parent, op.read):
        raise not_found(op.kind, op.id)
    if not admits(op.act, owner_terms(rec.owner), rec.id):
        raise ForbiddenError(f"not allowed on {op.kind.noun} '{op.id}'")


def _parent_seq(d: SqlDialect, kind: Kind, parent: str, schema_noun: str) -> Work[int | None]:
    if not parent:
        return None
    rows = []
    if kind.parents:
        rows = yield run(st.find_parent(d), "all", parent=parent, kinds=d.array(kind.parents))
    if not rows:
        raise NotFoundError(f"{schema_noun} '{parent}' not found")
    return min(int(row[0]) for row in rows)  # the earliest of a parent's id, as deleting it finds its children


def put(d: SqlDialect, op: Put, parent_noun: str, *, again: bool = False) -> Work[int]:
    """Store a record; its seq. ``parent_noun`` names the parent's kind in errors; ``again``: a retried upsert."""
    parent_seq = yield from _parent_seq(d, op.kind, op.parent, parent_noun)
    old = None
    if op.mode == "upsert":
        row = yield run(st.get_record(d, lock=True), "one", kind=op.kind.name, id=op.id)
        old = None if row is None else record(row)
    slot = _slot(op.kind, op.status, old.parent if old is not None else op.parent)
    yield from free_slot(d, op.kind, op.id, slot)
    values = _row_values(op.kind, op.body, op.status, op.lease_until, slot)
    if old is not None:
        try:
            yield run(st.update_record(d), "count", seq=old.seq, **values)
        except UniqueViolation:
            raise _slot_race(op.kind, slot) from None
        return old.seq
    try:
        row = yield run(st.insert_record(d), "one", **_new_row(op, parent_seq), **values)
    except UniqueViolation:
        raise _slot_race(op.kind, slot) from None
    except ForeignKeyViolation:
        # Another transaction deleted the parent after it was found (PostgreSQL only).
        raise NotFoundError(f"{parent_noun} '{op.parent}' not found") from None
    if row is None:
        if op.mode == "upsert" and not again:
            # Another transaction created the id after this one looked (PostgreSQL only): update what it made.
            return (yield from put(d, op, parent_noun, again=True))
        raise ConflictError(f"{op.kind.noun} '{op.id}' already exists")
    seq = int(row[0])
    yield run_each(st.insert_terms(d), _terms(op, seq))
    return seq


def _new_row(op: Put, parent_seq: int | None) -> dict[str, Any]:
    """A new record's columns but those :func:`_row_values` gives."""
    owner = op.owner
    return {
        "kind": op.kind.name,
        "id": op.id,
        "parent": op.parent,
        "parent_seq": parent_seq,
        "owner_key": None if owner is None else owner.key,
        "owner": None if owner is None else _dump(owner.to_json()),
        "at": time.time() if op.at is None else op.at,
    }


def _terms(op: Put, seq: int) -> list[dict[str, Any]]:
    return [{"kind": op.kind.name, "term": term, "seq": seq} for term in sorted(owner_terms(op.owner))]


def shared_puts(ops: Sequence[Op], start: int) -> list[Put]:
    """The run of operations from ``start`` that :func:`put_many` writes together: new records of one kind under
    one parent, holding no exclusive slot. Fewer than two: none."""
    alike: list[Put] = []
    for op in ops[start:]:
        if not isinstance(op, Put) or op.mode != "create" or op.status in op.kind.exclusive:
            break
        if alike and (op.kind != alike[0].kind or op.parent != alike[0].parent) or op.id == op.parent:
            break
        alike.append(op)
    return alike if len(alike) > 1 else []


def put_many(d: SqlDialect, ops: Sequence[Put], parent_noun: str) -> Work[list[int]]:
    """Store new records of :func:`shared_puts`' run a few statements for many (an item per row would cost three
    round trips each on PostgreSQL); their seqs, in order. The rows of one statement are numbered in their order.

    Raises:
        ConflictError: an id is taken, or repeats among them.
        NotFoundError: their parent does not exist.
    """
    first = ops[0]
    parent_seq = yield from _parent_seq(d, first.kind, first.parent, parent_noun)
    seqs: list[int] = []
    for start in range(0, len(ops), PUT_ROWS):
        chunk = ops[start : start + PUT_ROWS]
        params: dict[str, Any] = {}
        for n, op in enumerate(chunk):
            row = {**_new_row(op, parent_seq), **_row_values(op.kind, op.body, op.status, op.lease_until, None)}
            params.update({f"{name}_{n}": value for name, value in row.items()})
        try:
            rows = yield run(st.insert_records(d, len(chunk)), "all", **params)
        except ForeignKeyViolation:
            raise NotFoundError(f"{parent_noun} '{first.parent}' not found") from None  # as in put
        made = {record_id: int(seq) for seq, record_id in rows}
        terms: list[dict[str, Any]] = []
        taken: str | None = None  # the first id taken before, or repeated here (ON CONFLICT skipped its later rows)
        for op in chunk:
            if op.id not in made:
                taken = taken or op.id
                continue
            seq = made.pop(op.id)  # popped: a repeat of the id is not the row written
            seqs.append(seq)
            terms += _terms(op, seq)
        # Every row written gets its terms, even when the unit is about to fail: no record stands without them.
        yield run_each(st.insert_terms(d), terms)
        if taken is not None:
            raise ConflictError(f"{first.kind.noun} '{taken}' already exists")
    return seqs


def patch(d: SqlDialect, op: Patch) -> Work[bool]:
    """The compare-and-set: change a record in place when its status is one expected."""
    row = yield run(st.get_record(d, lock=True), "one", kind=op.kind.name, id=op.id)
    if row is None:
        if op.required:
            raise not_found(op.kind, op.id)
        return False
    rec = record(row)
    if op.expect_status is not None and rec.status not in op.expect_status:
        if op.required:
            raise ConflictError(f"{op.kind.noun} '{op.id}' is {rec.status}, not {sorted(op.expect_status)}")
        return False
    body = {**rec.body, **(op.merge or {})}
    for name in op.drop:
        body.pop(name, None)
    status = rec.status if op.status is KEEP else op.status
    lease_until = rec.lease_until if op.lease_until is KEEP else op.lease_until
    slot = _slot(op.kind, status, rec.parent)
    if slot is not None and rec.status not in op.kind.exclusive:
        yield from free_slot(d, op.kind, op.id, slot)
    try:
        yield run(st.update_record(d), "count", seq=rec.seq, **_row_values(op.kind, body, status, lease_until, slot))
    except UniqueViolation:
        raise _slot_race(op.kind, slot) from None
    return True


def delete(d: SqlDialect, op: Delete, schema: Schema | None = None) -> Work[bool]:
    """Delete a record; its children, logs and terms cascade.

    A foreign key leads a child to one parent record, but a kind may have several parent kinds, and a child
    belongs to every parent record with its parent's id. With a ``schema`` in which such a kind lies below
    ``op.kind``, the records below are found by parent id first and deleted too.
    """
    below = [] if schema is None else (yield from _below(d, schema, op.kind, op.id))
    count = yield run(st.delete_record(d), "count", kind=op.kind.name, id=op.id)
    if count:
        for kind, ids in below:
            yield run(st.delete_many(d), "count", kind=kind, ids=d.array(ids))
    return bool(count)


def _below(d: SqlDialect, schema: Schema, kind: Kind, record_id: str) -> Work[list[tuple[str, list[str]]]]:
    """The ids of every record below ``(kind, record_id)`` by parent id, by kind."""
    found: list[tuple[str, list[str]]] = []
    seen: set[tuple[str, str]] = {(kind.name, record_id)}
    frontier: list[tuple[Kind, list[str]]] = [(kind, [record_id])]
    while frontier:
        parent_kind, parents = frontier.pop()
        for child in schema.children(parent_kind):
            rows = yield run(st.children_of(d), "all", kind=child.name, ids=d.array(parents))
            ids = [row[0] for row in rows if (child.name, row[0]) not in seen]
            seen.update((child.name, child_id) for child_id in ids)
            if ids:
                found.append((child.name, ids))
                frontier.append((child, ids))
    return found


def shares_children(schema: Schema, kind: Kind) -> bool:
    """Whether a kind with several parent kinds lies below ``kind`` (its deletes must look children up by id)."""
    seen: set[str] = set()
    todo = [kind]
    while todo:
        for child in schema.children(todo.pop()):
            if len(child.parents) > 1:
                return True
            if child.name not in seen:
                seen.add(child.name)
                todo.append(child)
    return False


def _log_seq(d: SqlDialect, kind: Kind, record_id: str, channel: str) -> Work[tuple[int, int]]:
    """The record's seq and its log's next number (the record locked)."""
    if channel not in kind.logs:
        raise ValueError(f"kind {kind.name!r} has no log {channel!r}")
    row = yield run(st.log_head(d), "one", kind=kind.name, id=record_id, channel=channel)
    if row is None:
        raise not_found(kind, record_id)
    seq, last = row
    return int(seq), 0 if last is None else int(last) + 1


def _entries(seq: int, channel: str, first: int, entries: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"seq": seq, "channel": channel, "n": first + i, "body": body} for i, body in enumerate(entries)]


def append(d: SqlDialect, op: Append) -> Work[int]:
    """Add entries to a log; the first one's number."""
    seq, first = yield from _log_seq(d, op.kind, op.id, op.channel)
    yield run_each(st.insert_entry(d), _entries(seq, op.channel, first, op.entries))
    return first


def rewrite(d: SqlDialect, op: Rewrite) -> Work[int]:
    """Replace a log; its new count."""
    seq, _ = yield from _log_seq(d, op.kind, op.id, op.channel)
    yield run(st.clear_log(d), "count", seq=seq, channel=op.channel)
    yield run_each(st.insert_entry(d), _entries(seq, op.channel, 0, op.entries))
    return len(op.entries)


def claim_rows(
    d: SqlDialect, kind: Kind, rows: list[Rec], status: str | None, lease_until: float | None, limit: int
) -> Work[list[Rec]]:
    """Give each expired record ``status`` and ``lease_until``, skipping any whose slot another holds."""
    claimed: list[Rec] = []
    for rec in rows:
        if len(claimed) >= limit:
            break
        if status is None:
            yield run(st.claim(d, with_status=False), "count", seq=rec.seq, lease_until=lease_until)
        else:
            slot = _slot(kind, status, rec.parent)
            taking = slot is not None and rec.status not in kind.exclusive
            try:
                if taking:
                    yield from free_slot(d, kind, rec.id, slot)
            except ConflictError:
                continue
            update = run(
                st.claim(d, with_status=True), "count", seq=rec.seq, lease_until=lease_until, status=status, slot=slot
            )
            if taking and not d.is_sqlite:
                if not (yield from _unless_slot_raced(update)):
                    continue
            else:
                yield update
        claimed.append(rec)
    return claimed


def _unless_slot_raced(update: Query[Any]) -> Work[bool]:
    """Run ``update``; False (and nothing changed) when a concurrent sweep took the slot it takes meanwhile.

    A unique violation aborts a PostgreSQL transaction, so the update runs in a savepoint the sweep can roll
    back to and go on with its other records. (SQLite's single writer cannot race: its slot check decides.)
    """
    yield Query("SAVEPOINT claim_slot", {}, "all")
    try:
        yield update
    except UniqueViolation:
        yield Query("ROLLBACK TO SAVEPOINT claim_slot", {}, "all")
        return False
    yield Query("RELEASE SAVEPOINT claim_slot", {}, "all")
    return True


WRITES: dict[type, Any] = {
    Check: check,
    Patch: patch,
    Delete: delete,
    Append: append,
    Rewrite: rewrite,
}
"""Each write operation's unit, but ``Put``'s (which also takes its parent's noun)."""
