"""The SQL kernel's read operations, each a unit of work (see :mod:`.seam`) of one statement or two.

They run alone (``read``) or inside a write batch, where they see the batch's earlier writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from ferryman.errors import NotFoundError
from ferryman.storage.kernel.filters import Filter, Nothing, admits
from ferryman.storage.kernel.model import Kind, LogEntry, Owner, PageOf, Rec, owner_terms
from ferryman.storage.kernel.ops import Chain, CountStatus, Events, Get, GetMany, History, LogCount, Page
from ferryman.storage.sql import kernel_statements as st
from ferryman.storage.sql.dialects import Compiled, SqlDialect
from ferryman.storage.sql.seam import NO_LIMIT, Query, Work

LAST_ENTRY = 2**31 - 1
"""The highest number a log entry can have (``record_logs.n`` is a 32-bit integer)."""
OWNERS_CACHED = 1024
"""Decoded owners kept (by their JSON text)."""


def run(compiled: Compiled, fetch: Any, **params: Any) -> Query[Any]:
    """A query of a compiled statement with these parameters (``fetch`` as in :class:`~.seam.Query`)."""
    return Query(compiled.sql, compiled.params(params), fetch)


def run_each(compiled: Compiled, batch: Sequence[Mapping[str, Any]]) -> Query[None]:
    """The statement once per parameter set."""
    return Query(compiled.sql, [compiled.params(params) for params in batch], "many")


@lru_cache(maxsize=OWNERS_CACHED)
def _owner(text: str) -> Owner:
    # Owners repeat across rows (a page is mostly one caller's) and are values: decode each text once.
    return Owner.from_json(json.loads(text))


def record(row: Sequence[Any]) -> Rec:
    """A record of a row of :data:`~.kernel_statements.REC_COLUMNS`."""
    kind, record_id, parent, seq, at, owner, body, status, lease_until = row[:9]
    held = _owner(owner) if owner is not None else None
    return Rec(kind, record_id, parent, int(seq), float(at), held, json.loads(body), status, lease_until)


def visible(rec: Rec, parent: str | None, allow: Filter) -> bool:
    """Whether ``rec`` belongs to ``parent`` (None: any) and ``allow`` admits it."""
    if parent is not None and rec.parent != parent:
        return False
    return admits(allow, owner_terms(rec.owner), rec.id)


def not_found(kind: Kind, record_id: str) -> NotFoundError:
    """The error naming a missing record of ``kind``."""
    return NotFoundError(f"{kind.noun} '{record_id}' not found")


def get(d: SqlDialect, op: Get) -> Work[Rec | None]:
    """One record, or None when missing, elsewhere or not allowed."""
    row = yield run(st.get_record(d), "one", kind=op.kind.name, id=op.id)
    if row is None:
        return None
    rec = record(row)
    return rec if visible(rec, op.parent, op.allow) else None


def get_many(d: SqlDialect, op: GetMany) -> Work[list[Rec]]:
    """The records that exist, in the order asked."""
    if not op.ids:
        return []
    rows = yield run(st.get_many(d), "all", kind=op.kind.name, ids=d.array(op.ids))
    found = {rec.id: rec for rec in map(record, rows)}
    return [found[record_id] for record_id in op.ids if record_id in found]


def page(d: SqlDialect, op: Page) -> Work[PageOf[Rec]]:
    """A page in creation order, filtered in the query (``allow`` by the terms index)."""
    if isinstance(op.allow, Nothing) and op.after is None:
        return PageOf([], False)
    allow, values = st.filter_shape(op.allow)
    shape = st.PageShape(
        any_parent=op.parent is None,
        where=None if op.where is None else op.kind.index_slot(op.where[0]),
        statuses=op.statuses is not None,
        since=op.since is not None,
        until=op.until is not None,
        after=op.after is not None,
        desc=op.desc,
        allow=allow,
    )
    params: dict[str, Any] = {
        name: d.array(value) if isinstance(value, frozenset) else value for name, value in values.items()
    }
    params |= {
        "kind": op.kind.name,
        "parent": op.parent,
        "value": None if op.where is None else op.where[1],
        "statuses": None if op.statuses is None else d.array(op.statuses),
        "since": op.since,
        "until": op.until,
        "after": op.after,
        "limit": NO_LIMIT if op.limit is None else op.limit + 1,
        "offset": op.offset,
        "window": NO_LIMIT if op.limit is None else op.offset + op.limit + 1,
        "zero": 0,
    }
    rows = yield run(st.page(d, shape), "all", **params)
    if not rows and op.after is not None:
        mark = yield run(st.get_record(d), "one", kind=op.kind.name, id=op.after)
        if mark is None:
            raise not_found(op.kind, op.after)
    items = [record(row) for row in rows]
    if op.limit is None:
        return PageOf(items, False)
    return PageOf(items[: op.limit], len(items) > op.limit)


def count_status(d: SqlDialect, op: CountStatus) -> Work[dict[str, int]]:
    """How many of a parent's records have each status."""
    where = None if op.where is None else op.kind.index_slot(op.where[0])
    params: dict[str, Any] = {"kind": op.kind.name, "parent": op.parent}
    if op.where is not None:
        params["value"] = op.where[1]
    rows = yield run(st.count_status(d, where), "all", **params)
    return {status: int(n) for status, n in rows}


def events(d: SqlDialect, op: Events) -> Work[list[LogEntry]]:
    """A log's entries after number ``after``."""
    limit = NO_LIMIT if op.limit is None else min(op.limit, NO_LIMIT)
    # Entry numbers are 32-bit: a cursor past them all reads nothing, one before them all reads them all
    # (PostgreSQL refuses a wider parameter).
    after = max(-1, min(op.after, LAST_ENTRY))
    rows = yield run(st.events(d), "all", kind=op.kind.name, id=op.id, channel=op.channel, after=after, limit=limit)
    return [LogEntry(int(n), body) for n, body in rows]


def log_count(d: SqlDialect, op: LogCount) -> Work[int]:
    """How many entries a log holds."""
    row = yield run(st.log_count(d), "one", kind=op.kind.name, id=op.id, channel=op.channel)
    return int(row[0]) if row is not None else 0


def history(d: SqlDialect, op: History) -> Work[list[tuple[str, LogEntry]]]:
    """The logs of a parent's records with one of ``statuses`` (and ``through``), in order."""
    params: dict[str, Any] = {
        "kind": op.kind.name,
        "parent": op.parent,
        "channel": op.channel,
        "statuses": d.array(op.statuses),
    }
    if op.through is not None:
        params["through"] = op.through
    rows = yield run(st.history(d, through=op.through is not None), "all", **params)
    return [(record_id, LogEntry(int(n), body)) for record_id, n, body in rows]


def chain(d: SqlDialect, op: Chain) -> Work[list[Rec]]:
    """A record and those its field ``via`` points to, nearest first."""
    via = op.kind.index_slot(op.via)
    if op.limit <= 0:
        return []
    rows = yield run(st.chain(d, via), "all", kind=op.kind.name, id=op.id, limit=op.limit)
    return [record(row) for row in rows]


READS: dict[type, Any] = {
    Get: get,
    GetMany: get_many,
    Page: page,
    CountStatus: count_status,
    Events: events,
    LogCount: log_count,
    History: history,
    Chain: chain,
}
"""Each read operation's unit."""
