"""Typed records of one kind over a kernel: create, read, page, replace and delete, written once.

A kind whose records are plain values (a registration, a key, an audit entry)
needs nothing more than its :class:`~ferryman.storage.kernel.model.Kind` and a
:class:`Records` over it: the owner rides in the record's own write, a caller's
access filter in the same query, and every backend serves it unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel

from ferryman.errors import NotFoundError
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.filters import ALL, Filter
from ferryman.storage.kernel.model import Json, Kind, Owner, PageOf, Rec
from ferryman.storage.kernel.protocol import Kernel

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

Writer = Callable[[Sequence[ops.Op]], Awaitable[list[Any]]]
"""Runs a write batch as one transaction (or script): the kernel's ``write``, or one that adds to it."""
D = TypeVar("D", bound="DataclassInstance")


class HasKernel(Protocol):
    """A store, as the operations written once above its kernel see it."""

    @property
    def kernel(self) -> Kernel: ...


class Codec(Protocol[T]):
    """How a value becomes a record's JSON body and back."""

    def dump(self, value: T) -> Json:
        """The body of ``value``."""
        ...

    def load(self, body: Json) -> T:
        """The value of ``body``."""
        ...


class ModelCodec(Generic[M]):
    """A pydantic model as its JSON-mode dump.

    Args:
        model: The model class.
    """

    def __init__(self, model: type[M]) -> None:
        self.model = model

    def dump(self, value: M) -> Json:
        """The model's JSON-mode dump (``None`` fields left out)."""
        return value.model_dump(mode="json", exclude_none=True)

    def load(self, body: Json) -> M:
        """The model, validated from ``body``."""
        return self.model.model_validate(body)


class FieldsCodec(Generic[D]):
    """A dataclass as its fields (each a JSON value as it is).

    Args:
        cls: The dataclass.
    """

    def __init__(self, cls: type[D]) -> None:
        self.cls = cls

    def dump(self, value: D) -> Json:
        """The value's fields."""
        return asdict(value)

    def load(self, body: Json) -> D:
        """The value of the fields ``dump`` stored."""
        return self.cls(**body)


@dataclass(frozen=True)
class Stored(Generic[T]):
    """A value and the record that holds it (its owner, creation order and time)."""

    value: T
    rec: Rec


class Records(Generic[T]):
    """The records of one kind, as typed values.

    Args:
        kernel: The backend.
        kind: The kind.
        codec: How values become bodies.
        id_of: A value's id.
        dated: A value's creation time, its record's ``at`` unless a put says otherwise (None: the write's time).
    """

    def __init__(
        self,
        kernel: Kernel,
        kind: Kind,
        codec: Codec[T],
        id_of: Callable[[T], str],
        dated: Callable[[T], float] | None = None,
    ) -> None:
        self.kernel = kernel
        self.kind = kind
        self.codec = codec
        self.id_of = id_of
        self.dated = dated

    def put(
        self,
        value: T,
        *,
        owner: Owner | None = None,
        parent: str = "",
        mode: Literal["create", "upsert"] = "create",
        at: float | None = None,
        lease_until: float | None = None,
    ) -> ops.Put:
        """The operation storing ``value`` (to run in a batch with others), leased until ``lease_until``."""
        body = self.codec.dump(value)
        if at is None and self.dated is not None:
            at = self.dated(value)
        return ops.Put(self.kind, self.id_of(value), body, parent, owner, mode, lease_until=lease_until, at=at)

    async def create(
        self,
        value: T,
        *,
        owner: Owner | None = None,
        parent: str = "",
        lease_until: float | None = None,
        before: Sequence[ops.Op] = (),
        after: Sequence[ops.Op] = (),
        write: Writer | None = None,
    ) -> None:
        """Store a new record, with ``before`` (a guard) and ``after`` in the same batch, run by ``write``
        (default: the kernel's; one that also stores an idempotency key's outcome, say).

        Raises:
            ConflictError: its id is taken.
        """
        put = self.put(value, owner=owner, parent=parent, lease_until=lease_until)
        await (write or self.kernel.write)([*before, put, *after])

    async def upsert(
        self, value: T, *, owner: Owner | None = None, before: Sequence[ops.Op] = (), write: Writer | None = None
    ) -> None:
        """Store ``value``, replacing the body of an existing record of its id (which keeps its owner), in a
        batch run by ``write`` (default: the kernel's)."""
        await (write or self.kernel.write)([*before, self.put(value, owner=owner, mode="upsert")])

    async def find(self, record_id: str, *, allow: Filter = ALL, parent: str | None = None) -> Stored[T] | None:
        """The record, or None when it is missing or ``allow`` excludes it."""
        (rec,) = await self.kernel.read([ops.Get(self.kind, record_id, parent, allow)])
        return None if rec is None else self.stored(rec)

    async def get(self, record_id: str, *, allow: Filter = ALL, parent: str | None = None) -> T:
        """The value of a record.

        Raises:
            NotFoundError: it is missing, or ``allow`` excludes it.
        """
        found = await self.find(record_id, allow=allow, parent=parent)
        if found is None:
            raise NotFoundError(f"{self.kind.noun} '{record_id}' not found")
        return found.value

    async def page(
        self,
        *,
        allow: Filter = ALL,
        parent: str | None = "",
        where: tuple[str, str] | None = None,
        after: str | None = None,
        offset: int = 0,
        limit: int | None = None,
        desc: bool = False,
        since: float | None = None,
        until: float | None = None,
    ) -> PageOf[T]:
        """A page of values in creation order (see :class:`~ferryman.storage.kernel.ops.Page`)."""
        found = await self.stored_page(
            allow=allow, parent=parent, where=where, after=after, offset=offset, limit=limit, desc=desc,
            since=since, until=until,
        )  # fmt: skip
        return PageOf([item.value for item in found.items], found.has_more)

    async def stored_page(self, **query: Any) -> PageOf[Stored[T]]:
        """Like :meth:`page`, with each value's record."""
        (found,) = await self.kernel.read([ops.Page(self.kind, **query)])
        return PageOf([self.stored(rec) for rec in found.items], found.has_more)

    async def all(self, *, allow: Filter = ALL, parent: str | None = "") -> list[T]:
        """Every value ``allow`` admits, in creation order."""
        return (await self.page(allow=allow, parent=parent)).items

    async def delete(self, record_id: str, *, before: Sequence[ops.Op] = ()) -> bool:
        """Delete a record and what belongs to it; whether it existed."""
        results = await self.kernel.write([*before, ops.Delete(self.kind, record_id)])
        return bool(results[-1])

    def stored(self, rec: Rec) -> Stored[T]:
        """The value a record holds."""
        return Stored(self.codec.load(rec.body), rec)
