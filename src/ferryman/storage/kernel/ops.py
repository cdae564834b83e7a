"""The operations a kernel runs, as values: a batch of them is one transaction (one script on Redis).

Write operations change state; read operations may appear in a write batch too,
and then see the writes before them. A batch is atomic: when an operation fails
its precondition, the batch raises and nothing it wrote remains. Within a batch,
each operation sees the effects of the ones before it.

Errors a batch raises (every backend the same): ``NotFoundError`` (a ``Check``
on a missing record or one its ``read`` filter excludes, a required ``Patch`` or
an ``Append`` on a missing record, a ``Put`` under a missing parent);
``ForbiddenError`` (a ``Check`` whose ``act`` filter excludes the record);
``ConflictError`` (a ``Put(mode="create")`` whose id is taken, an exclusive
status already held in the parent, a required ``Patch`` whose ``expect_status``
does not hold).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Literal, Union

from ferryman.storage.kernel.filters import ALL, Filter
from ferryman.storage.kernel.model import Json, Kind, Owner


class _Keep(Enum):
    KEEP = "keep"


KEEP = _Keep.KEEP
"""Leave a field of a ``Patch`` as it is."""
MAX_COUNT = 2**31 - 1
"""The largest count or position an operation takes (what every backend's integers hold)."""


# -- writes ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """Require a record the caller may read (else ``NotFoundError``) and act on (else ``ForbiddenError``)."""

    kind: Kind
    id: str
    read: Filter = ALL
    act: Filter = ALL
    parent: str | None = None
    """When given, the record must also belong to this parent (else ``NotFoundError``)."""


@dataclass(frozen=True)
class Put:
    """Store a record; the result is its ``seq``.

    ``create`` refuses a taken id; ``upsert`` replaces the body (and status/lease) of an existing record,
    keeping its seq, creation time and owner. The parent, when given, must exist.
    """

    kind: Kind
    id: str
    body: Json
    parent: str = ""
    owner: Owner | None = None
    mode: Literal["create", "upsert"] = "create"
    status: str | None = None
    lease_until: float | None = None
    at: float | None = None
    """The creation time; None: now."""


@dataclass(frozen=True)
class Patch:
    """Change a record in place: the compare-and-set. The result is whether it changed.

    ``merge`` sets top-level body fields and ``drop`` removes them. With ``expect_status``, the record's
    status must be one of those; when it is not (or the record is missing) a ``required`` patch fails the
    batch (``ConflictError``; ``NotFoundError`` if missing) and an optional one returns False.
    """

    kind: Kind
    id: str
    merge: Json | None = None
    drop: tuple[str, ...] = ()
    status: str | None | _Keep = KEEP
    lease_until: float | None | _Keep = KEEP
    expect_status: frozenset[str] | None = None
    required: bool = True


@dataclass(frozen=True)
class Delete:
    """Delete a record, its logs and every record below it; the result is whether it existed."""

    kind: Kind
    id: str


@dataclass(frozen=True)
class Append:
    """Add entries to the end of a record's log; the result is the first entry's number."""

    kind: Kind
    id: str
    channel: str
    entries: tuple[str, ...]


@dataclass(frozen=True)
class Rewrite:
    """Replace a record's whole log (numbered from 0 again); the result is the new count."""

    kind: Kind
    id: str
    channel: str
    entries: tuple[str, ...]


# -- reads -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Get:
    """One record, or None when it is missing, belongs elsewhere or ``allow`` excludes it."""

    kind: Kind
    id: str
    parent: str | None = None
    allow: Filter = ALL


@dataclass(frozen=True)
class GetMany:
    """The records with these ids that exist, in the order asked."""

    kind: Kind
    ids: tuple[str, ...]


@dataclass(frozen=True)
class Page:
    """A page of records in creation order (``PageOf[Rec]``).

    ``parent`` None lists every parent's. ``where`` is an equality on a declared index; ``since``/``until``
    bound the creation time (inclusive/exclusive). ``after`` is the id of the last record of the previous page
    (keyset paging; it must exist, else ``NotFoundError``); ``offset`` skips records instead.
    """

    kind: Kind
    parent: str | None = ""
    where: tuple[str, str] | None = None
    allow: Filter = ALL
    statuses: frozenset[str] | None = None
    since: float | None = None
    until: float | None = None
    after: str | None = None
    offset: int = 0
    limit: int | None = None
    desc: bool = False

    def __post_init__(self) -> None:
        if self.offset < 0 or (self.limit is not None and self.limit < 0):
            raise ValueError("a page's limit and offset may not be negative")


@dataclass(frozen=True)
class CountStatus:
    """How many records of a parent have each status (``dict[str, int]``; records without status are absent)."""

    kind: Kind
    parent: str
    where: tuple[str, str] | None = None


@dataclass(frozen=True)
class Events:
    """A record's log entries after number ``after`` (``list[LogEntry]``; empty for a missing record)."""

    kind: Kind
    id: str
    channel: str
    after: int = -1
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 0:
            raise ValueError("an events read's limit may not be negative")


@dataclass(frozen=True)
class LogCount:
    """How many entries a record's log holds (0 for a missing record)."""

    kind: Kind
    id: str
    channel: str


@dataclass(frozen=True)
class History:
    """The logs of a parent's records with one of ``statuses``, in creation order, then entry order.

    The result is ``list[tuple[str, LogEntry]]`` (the record's id, the entry). ``through`` stops after that
    record (included whatever its status); records created after it are left out.
    """

    kind: Kind
    parent: str
    channel: str
    statuses: frozenset[str] = field(default_factory=lambda: frozenset({"completed"}))
    through: str | None = None


@dataclass(frozen=True)
class Chain:
    """A record and the ones its indexed field ``via`` points to, newest first, at most ``limit`` (``list[Rec]``)."""

    kind: Kind
    id: str
    via: str
    limit: int

    def __post_init__(self) -> None:
        if not 0 <= self.limit <= MAX_COUNT:
            raise ValueError(f"a chain's limit is between 0 and {MAX_COUNT}")


WriteOp = Union[Check, Put, Patch, Delete, Append, Rewrite]  # noqa: UP007
ReadOp = Union[Get, GetMany, Page, CountStatus, Events, LogCount, History, Chain]  # noqa: UP007
Op = Union[WriteOp, ReadOp]  # noqa: UP007
