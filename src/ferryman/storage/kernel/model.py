"""What the kernel stores: kinds of records, their owners, and the records themselves.

A :class:`Kind` is a declaration, the whole schema of one kind of record: which
kinds may be its parent (deleting a parent deletes its children), which body
fields are indexed for equality lookups, which statuses make a record the one
running record of its parent, and which append-only logs it carries. Adding a
kind adds no backend code: it is a value in a :class:`Schema`.

An :class:`Owner` is a plain value (storage knows nothing of authentication):
the services turn a principal into one. Its :meth:`Owner.terms` are what an
access filter (see :mod:`.filters`) matches, so a policy's grants by team or
role are answered from an index instead of by reading every record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

Json = dict[str, Any]
T = TypeVar("T")

ATTRIBUTE_KINDS = ("roles", "teams", "projects", "namespaces")
"""The owner attributes indexed as terms (the access policy's categories)."""
UNOWNED = "-"
"""The one term of a record without an owner (made by the server itself)."""
MAX_INDEXES = 3
_KEY_PREFIXES = {"api_key": "key", "subject": "sub"}


@dataclass(frozen=True)
class Owner:
    """Who created a record, as stored with it.

    Attributes:
        kind: The namespace of ``id`` (``api_key`` or ``subject``).
        id: Who it is within that namespace.
        attributes: A snapshot of its ``roles``, ``teams``, ``projects`` and ``namespaces`` at creation.
    """

    kind: str
    id: str
    attributes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The owner as one text, the same for the same caller whatever its attributes.

        ``key:NAME`` for an API key, ``sub:ID`` for a subject (what logs, audit records and quotas call a
        principal), ``<kind>:<id>`` for any other kind.
        """
        return f"{_KEY_PREFIXES.get(self.kind, self.kind)}:{self.id}"

    def terms(self) -> frozenset[str]:
        """The index terms of a record this owner made: ``p:<key>`` and ``<category>:<value>`` per attribute."""
        found = {principal_term(self.key)}
        for category in ATTRIBUTE_KINDS:
            found.update(attribute_term(category, value) for value in self.attributes.get(category, ()))
        return frozenset(found)

    def to_json(self) -> Json:
        """The owner as JSON (what backends store)."""
        return {"kind": self.kind, "id": self.id, "attributes": {k: list(v) for k, v in self.attributes.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Owner:
        """The owner :meth:`to_json` wrote."""
        attributes = {str(k): tuple(str(v) for v in values) for k, values in dict(data.get("attributes", {})).items()}
        return cls(str(data["kind"]), str(data["id"]), attributes)


def principal_term(owner_key: str) -> str:
    """The term naming one owner (see :attr:`Owner.key`)."""
    return f"p:{owner_key}"


def attribute_term(category: str, value: str) -> str:
    """The term naming one attribute value (``teams:red``)."""
    return f"{category}:{value}"


def owner_terms(owner: Owner | None) -> frozenset[str]:
    """The terms stored for a record with this owner (``{"-"}`` for none)."""
    return owner.terms() if owner is not None else frozenset({UNOWNED})


@dataclass(frozen=True)
class Kind:
    """The declaration of one kind of record.

    Attributes:
        name: The kind's name, unique in its schema (stored with every record).
        noun: How errors name a record of this kind ("agent", "vector store").
        parents: The kinds a record of this kind may belong to; deleting the parent deletes it. Empty: a root.
        indexes: Up to three top-level body fields looked up by equality (``Page(where=...)``, ``Chain``).
        exclusive: Statuses of which a parent holds at most one record of this kind at a time (a running turn).
        logs: The append-only channels a record of this kind carries ("events", "messages").
    """

    name: str
    noun: str = ""
    parents: tuple[str, ...] = ()
    indexes: tuple[str, ...] = ()
    exclusive: frozenset[str] = frozenset()
    logs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.indexes) > MAX_INDEXES:
            raise ValueError(f"kind {self.name!r} declares {len(self.indexes)} indexes; at most {MAX_INDEXES}")
        if not self.noun:
            object.__setattr__(self, "noun", self.name.replace("_", " "))

    def index_values(self, body: Mapping[str, Any]) -> tuple[str | None, ...]:
        """The values of the declared indexes in ``body``, as text (None where absent), padded to three."""
        values = [_index_text(body.get(name)) for name in self.indexes]
        return tuple(values + [None] * (MAX_INDEXES - len(values)))

    def index_slot(self, field_name: str) -> int:
        """The position (0-2) of an indexed field.

        Raises:
            ValueError: ``field_name`` is not one of the kind's indexes.
        """
        if field_name not in self.indexes:
            raise ValueError(f"kind {self.name!r} has no index on {field_name!r}")
        return self.indexes.index(field_name)


def _index_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Schema:
    """Every kind a kernel stores, and which kinds are whose children.

    Args:
        kinds: The kinds; names are unique and every parent named is among them.
    """

    def __init__(self, kinds: Iterable[Kind]) -> None:
        self.kinds: dict[str, Kind] = {}
        for kind in kinds:
            if kind.name in self.kinds:
                raise ValueError(f"kind {kind.name!r} declared twice")
            self.kinds[kind.name] = kind
        for kind in self.kinds.values():
            missing = [parent for parent in kind.parents if parent not in self.kinds]
            if missing:
                raise ValueError(f"kind {kind.name!r} names unknown parent kinds {missing}")

    def __getitem__(self, name: str) -> Kind:
        return self.kinds[name]

    def __contains__(self, kind: object) -> bool:
        return isinstance(kind, Kind) and self.kinds.get(kind.name) == kind

    def require(self, ops: Iterable[object]) -> None:
        """Refuse operations on a kind this schema does not declare (a programming error).

        Raises:
            ValueError: an operation's ``kind`` is not one of the schema's.
        """
        for op in ops:
            kind = getattr(op, "kind", None)
            if isinstance(kind, Kind) and kind not in self:
                raise ValueError(f"kind {kind.name!r} is not declared in this kernel's schema")

    def children(self, kind: Kind) -> Sequence[Kind]:
        """The kinds whose records may belong to a record of ``kind``."""
        return [child for child in self.kinds.values() if kind.name in child.parents]


@dataclass(frozen=True)
class Rec:
    """One stored record.

    Attributes:
        kind: Its kind's name.
        id: Its id, unique within its kind.
        parent: The id of the record it belongs to ("" for a root).
        seq: Its creation order among all records of every kind (never reused).
        at: When it was created (seconds since the epoch).
        owner: Who created it (None: the server itself).
        body: Its JSON body.
        status: Its status, for records with one (runs, ingestion).
        lease_until: When the lease of whoever runs it ends (None: not leased).
    """

    kind: str
    id: str
    parent: str
    seq: int
    at: float
    owner: Owner | None
    body: Json
    status: str | None = None
    lease_until: float | None = None


@dataclass(frozen=True)
class PageOf(Generic[T]):
    """One page of a listing and whether more follow."""

    items: list[T]
    has_more: bool


@dataclass(frozen=True)
class LogEntry:
    """One entry of a record's append-only log: its number (from 0) and its text."""

    n: int
    body: str
