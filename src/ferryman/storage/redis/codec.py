"""How kernel operations travel to the Redis scripts (JSON) and how their answers come back as values.

An operation becomes a JSON object tagged ``o``. ``None`` is left out (absent in
Lua: ``nil``), except for a ``Patch``'s status and lease, where absent means
"keep" and ``false`` means "none". Times travel as text (``repr`` of the float)
and are stored as that text: Lua prints numbers with 14 digits, so the scripts
compare them as numbers but never print them. Body fields travel as their own
JSON texts, which the scripts store without decoding.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from ferryman.storage.kernel.filters import to_json
from ferryman.storage.kernel.model import Json, LogEntry, Owner, PageOf, Rec, Schema, owner_terms
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
    Rewrite,
)

LAST_ENTRY = 2**31 - 1
"""Past any log's end: cursors and limits beyond it are cut to it, since a script's LRANGE would refuse them
(Lua prints a large number as ``1e+20``) after the batch's earlier writes."""


def schema_json(schema: Schema) -> str:
    """What the scripts know of each kind: its noun, parents, children, exclusive statuses and logs."""
    return _dumps(
        {
            name: {
                "noun": kind.noun,
                "parents": list(kind.parents),
                "children": [child.name for child in schema.children(kind)],
                "exclusive": sorted(kind.exclusive),
                "logs": list(kind.logs),
            }
            for name, kind in schema.kinds.items()
        }
    )


def encode(op: Op, schema: Schema) -> Json:
    """One operation as the scripts read it.

    Raises:
        ValueError: its kind is not in ``schema``, its log channel is not declared, or a field it looks up is
            not an index of its kind.
        TypeError: it is not a kernel operation.
    """
    kind = getattr(op, "kind", None)
    if kind is not None and kind not in schema:
        raise ValueError(f"kind {kind.name!r} is not in this kernel's schema")
    if isinstance(op, Append | Rewrite) and op.channel not in op.kind.logs:
        raise ValueError(f"kind {op.kind.name!r} has no log {op.channel!r}")
    encoder = _ENCODERS.get(type(op))
    if encoder is None:
        raise TypeError(f"not a kernel operation: {op!r}")
    return {key: value for key, value in encoder(op).items() if value is not None}


def _time(value: float | None) -> str | None:
    return None if value is None else repr(float(value))


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _fields(body: Mapping[str, Any]) -> list[list[str]]:
    return [[name, _dumps(value)] for name, value in body.items()]


def _or_false(value: str | None) -> str | bool:
    return False if value is None else value


def _put(op: Put) -> Json:
    return {
        "o": "put",
        "k": op.kind.name,
        "id": op.id,
        "parent": op.parent,
        "body": _fields(op.body),
        "owner": None if op.owner is None else _dumps(op.owner.to_json()),
        "terms": _dumps(sorted(owner_terms(op.owner))),
        "mode": op.mode,
        "status": op.status,
        "lease": _time(op.lease_until),
        "at": _time(time.time() if op.at is None else op.at),
        "idx": [_or_false(value) for value in op.kind.index_values(op.body)],
    }


def _patch(op: Patch) -> Json:
    merge = op.merge or {}
    values = op.kind.index_values(merge)
    slots = [
        [slot + 1, False if name in op.drop else _or_false(values[slot])]
        for slot, name in enumerate(op.kind.indexes)
        if name in merge or name in op.drop
    ]
    return {
        "o": "patch",
        "k": op.kind.name,
        "id": op.id,
        "merge": _fields(merge),
        "drop": list(op.drop),
        "status": None if op.status is KEEP else _or_false(op.status),
        "lease": None if op.lease_until is KEEP else _or_false(_time(op.lease_until)),
        "expect": None if op.expect_status is None else sorted(op.expect_status),
        "required": op.required,
        "idx": slots,
    }


def _page(op: Page) -> Json:
    where = None if op.where is None else [op.kind.index_slot(op.where[0]) + 1, op.where[1]]
    return {
        "o": "page",
        "k": op.kind.name,
        "parent": op.parent,
        "where": where,
        "allow": to_json(op.allow),
        "statuses": None if op.statuses is None else sorted(op.statuses),
        "since": _time(op.since),
        "till": _time(op.until),
        "after": op.after,
        "offset": op.offset,
        "limit": op.limit,
        "desc": op.desc,
    }


def _count(op: CountStatus) -> Json:
    where = None if op.where is None else [op.kind.index_slot(op.where[0]) + 1, op.where[1]]
    return {"o": "count", "k": op.kind.name, "parent": op.parent, "where": where}


_ENCODERS: dict[type, Callable[[Any], Json]] = {
    Check: lambda op: {
        "o": "check",
        "k": op.kind.name,
        "id": op.id,
        "read": to_json(op.read),
        "act": to_json(op.act),
        "parent": op.parent,
    },
    Put: _put,
    Patch: _patch,
    Delete: lambda op: {"o": "delete", "k": op.kind.name, "id": op.id},
    Append: lambda op: {"o": "append", "k": op.kind.name, "id": op.id, "ch": op.channel, "entries": list(op.entries)},
    Rewrite: lambda op: {"o": "rewrite", "k": op.kind.name, "id": op.id, "ch": op.channel, "entries": list(op.entries)},
    Get: lambda op: {"o": "get", "k": op.kind.name, "id": op.id, "parent": op.parent, "allow": to_json(op.allow)},
    GetMany: lambda op: {"o": "getmany", "k": op.kind.name, "ids": list(op.ids)},
    Page: _page,
    CountStatus: _count,
    Events: lambda op: {
        "o": "events",
        "k": op.kind.name,
        "id": op.id,
        "ch": op.channel,
        "after": min(op.after, LAST_ENTRY),
        "limit": None if op.limit is None else min(op.limit, LAST_ENTRY),
    },
    LogCount: lambda op: {"o": "logcount", "k": op.kind.name, "id": op.id, "ch": op.channel},
    History: lambda op: {
        "o": "history",
        "k": op.kind.name,
        "parent": op.parent,
        "ch": op.channel,
        "statuses": sorted(op.statuses),
        "through": op.through,
    },
    Chain: lambda op: {
        "o": "chain",
        "k": op.kind.name,
        "id": op.id,
        "slot": op.kind.index_slot(op.via) + 1,
        "limit": op.limit,
    },
}


# -- answers -----------------------------------------------------------------------------------------------------


def _list(value: Any) -> list[Any]:
    """A JSON array from Lua (which writes an empty one as ``{}``)."""
    return value if isinstance(value, list) else []


def record(found: list[Any]) -> Rec:
    """A record from ``{kind, id, HGETALL}``."""
    kind, record_id, flat = found
    fields: dict[str, str] = dict(zip(flat[::2], flat[1::2], strict=True))
    body = {name[2:]: json.loads(text) for name, text in fields.items() if name.startswith("b:")}
    owner = fields.get("owner")
    lease = fields.get("lease")
    return Rec(
        kind,
        record_id,
        fields["parent"],
        int(fields["seq"]),
        float(fields["at"]),
        None if owner is None else Owner.from_json(json.loads(owner)),
        body,
        fields.get("status"),
        None if lease is None else float(lease),
    )


def records(found: Any) -> list[Rec]:
    """Records from a JSON array of them."""
    return [record(item) for item in _list(found)]


def _page_of(found: list[Any]) -> PageOf[Rec]:
    return PageOf(records(found[0]), bool(found[1]))


def _entries(found: Any) -> list[LogEntry]:
    flat = _list(found)
    return [LogEntry(int(n), body) for n, body in zip(flat[::2], flat[1::2], strict=True)]


def _history(found: Any) -> list[tuple[str, LogEntry]]:
    flat = _list(found)
    return [(str(flat[i]), LogEntry(int(flat[i + 1]), flat[i + 2])) for i in range(0, len(flat), 3)]


_DECODERS: dict[type, Callable[[Any], Any]] = {
    Check: lambda found: None,
    Put: int,
    Patch: bool,
    Delete: bool,
    Append: int,
    Rewrite: int,
    Get: lambda found: None if found is None else record(found),
    GetMany: records,
    Page: _page_of,
    CountStatus: lambda found: {str(status): int(n) for status, n in (found or {}).items()},
    Events: _entries,
    LogCount: int,
    History: _history,
    Chain: records,
}


def decode(op: Op, found: Any) -> Any:
    """The result of ``op`` from what its script answered for it."""
    return _DECODERS[type(op)](found)
