"""Items (a conversation's, a response's input, a fork holder's) as records of the kernel, written once.

An item is a record of kind ``item`` under its container (a conversation, a
response or a holder of what forks share), with the id
``<container id>/<item id>``: an item id is unique in its container and may
stand in several (a response's input and its conversation hold the same items).
Its body is the item's JSON, every field written; replacing it in place (a
redaction, which may change its type) patches every field it writes and drops
every other. The container's deletion deletes its items with it, on every
backend.

:class:`ItemRecords` gives a backend's store the item operations of
:class:`~ferryman.storage.base.ResponseStore` over its kernel; a backend's own
writes that store items beside its records (a new conversation's first items, a
response's input, a finished response's items in its conversation) put
:func:`item_puts` in the kernel batch they run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, get_args

from pydantic import BaseModel, TypeAdapter

from ferryman.api.limits import MAX_MESSAGES
from ferryman.api.responses import Item
from ferryman.errors import ConflictError, IdempotencyKeyInUseError, InvalidRequestError, NotFoundError
from ferryman.storage.base import KeySettlement
from ferryman.storage.domain.kinds import ITEM
from ferryman.storage.domain.records import HasKernel
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Json
from ferryman.storage.page import Page

_ITEM = TypeAdapter(Item)


def _fields_of(annotation: Any) -> frozenset[str]:
    """Every top-level field any model of a union of models may write."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return frozenset(annotation.model_fields)
    return frozenset().union(*(_fields_of(arg) for arg in get_args(annotation)))


_ITEM_FIELDS = _fields_of(Item)
"""The fields a stored item's body may hold, whatever its type: a replacement drops those it does not write."""


def item_record_id(container: str, item_id: str) -> str:
    """The record id of an item in its container."""
    return f"{container}/{item_id}"


def _repeated(container: str) -> InvalidRequestError:
    return InvalidRequestError(f"an item id is already used in '{container}'", "items")


@contextlib.contextmanager
def refusing_repeats(container: str) -> Iterator[None]:
    """Around a write whose one possible conflict is an item put's (its id taken in ``container``): that conflict
    as the caller's invalid request (a key held stays what it is).

    Raises:
        InvalidRequestError: an item id is used in the container already, or repeats.
    """
    try:
        yield
    except IdempotencyKeyInUseError:
        raise
    except ConflictError as exc:
        raise _repeated(container) from exc


def _body(item: Item) -> Json:
    body: Json = item.model_dump(mode="json")
    return body


def _item(body: Json) -> Item:
    return _ITEM.validate_python(body)


def item_puts(container: str, items: Sequence[Item]) -> list[ops.Put]:
    """The writes storing new items at the end of a container, in order.

    Raises:
        InvalidRequestError: an item has no id, or an id repeats among them.
    """
    seen: set[str] = set()
    puts: list[ops.Put] = []
    for item in items:
        if item.id is None:
            raise InvalidRequestError("a stored item needs an id", "items")
        if item.id in seen:
            raise _repeated(container)
        seen.add(item.id)
        puts.append(ops.Put(ITEM, item_record_id(container, item.id), _body(item), parent=container))
    return puts


class _KeyedKernel(HasKernel, Protocol):
    """What :class:`ItemRecords` needs of a store: its kernel and its keyed write."""

    async def write_keyed(self, ops: Sequence[ops.Op], settle: KeySettlement) -> list[Any]: ...


class _BatchItems(Protocol):
    async def items_of(self, owners: list[str]) -> dict[str, list[Item]]: ...


class ItemRecords:
    """The item operations of a store, over its kernel (a base of each backend's store)."""

    async def add_items(self: _KeyedKernel, owner: str, items: list[Item], settle: KeySettlement | None = None) -> None:
        """Append items to a container, with ``settle``'s key outcome in the same write.

        More than a request carries (a fork holder's copy of a long conversation, never keyed) are written a
        request's worth at a time: what is written stands if a later write fails (a holder left so is deleted by
        the next change of its conversation, whose mark names it).

        Raises:
            InvalidRequestError: an item id is used in the container already, or repeats (nothing of that
                request's worth is added).
            NotFoundError: the container does not exist.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        puts = item_puts(owner, items)
        with refusing_repeats(owner):  # the batch writes nothing else
            if settle is not None:
                await self.write_keyed(puts, settle)
                return
            for start in range(0, len(puts), MAX_MESSAGES):
                await self.kernel.write(puts[start : start + MAX_MESSAGES])

    async def replace_items(self: _KeyedKernel, owner: str, items: list[Item]) -> None:
        """Replace the bodies of a container's items, matched by id, in place; an id it does not hold is left
        out."""
        patches = []
        for item in items:
            if item.id is not None:
                body = _body(item)
                stale = tuple(sorted(_ITEM_FIELDS - body.keys()))
                patches.append(ops.Patch(ITEM, item_record_id(owner, item.id), merge=body, drop=stale, required=False))
        if patches:
            await self.kernel.write(patches)

    async def list_items(self: _KeyedKernel, owner: str, after: str | None, limit: int, order: str) -> Page[Item]:
        """A page of a container's items, oldest (``asc``) or newest (``desc``) first, after the item ``after``.

        Raises:
            NotFoundError: ``after`` is not an item of the container.
        """
        cursor = None if after is None else item_record_id(owner, after)
        page = ops.Page(ITEM, parent=owner, after=cursor, limit=limit, desc=order == "desc")
        try:
            (found,) = await self.kernel.read([page])
        except NotFoundError:
            raise NotFoundError(f"item '{after}' not found in '{owner}'") from None
        return Page([_item(rec.body) for rec in found.items], found.has_more)

    async def items_of(self: _KeyedKernel, owners: list[str]) -> dict[str, list[Item]]:
        """Every item of each of these containers, oldest first, read at one moment in one trip (a container
        without items: absent)."""
        distinct = list(dict.fromkeys(owners))
        if not distinct:
            return {}
        pages = await self.kernel.read([ops.Page(ITEM, parent=owner) for owner in distinct])
        return {
            owner: [_item(rec.body) for rec in page.items]
            for owner, page in zip(distinct, pages, strict=True)
            if page.items
        }

    async def all_items(self: _BatchItems, owner: str) -> list[Item]:
        """Every item of a container, oldest first."""
        return (await self.items_of([owner])).get(owner, [])

    async def get_item(self: _KeyedKernel, owner: str, item_id: str) -> Item:
        """One item of a container.

        Raises:
            NotFoundError: the container holds no such item.
        """
        (rec,) = await self.kernel.read([ops.Get(ITEM, item_record_id(owner, item_id), parent=owner)])
        if rec is None:
            raise NotFoundError(f"item '{item_id}' not found in '{owner}'")
        return _item(rec.body)

    async def delete_item(self: _KeyedKernel, owner: str, item_id: str) -> None:
        """Delete one item of a container.

        Raises:
            NotFoundError: the container holds no such item.
        """
        (deleted,) = await self.kernel.write([ops.Delete(ITEM, item_record_id(owner, item_id))])
        if not deleted:
            raise NotFoundError(f"item '{item_id}' not found in '{owner}'")
