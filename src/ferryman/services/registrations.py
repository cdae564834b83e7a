"""Registrations as one caller sees them: models, toolgroups and shields, with the access step explicit.

Every method takes the caller (``who``; None: the server itself) and applies
:class:`~ferryman.services.access.Access` to the records of one kind: a read
passes the caller's filter to storage (a registration it may not read is
missing to it), a create stores the caller as owner in the record's own write,
a delete carries its guard in the batch that deletes. Denials, creates and
deletes are audited as :class:`Access` does.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Generic, TypeVar

from ferryman.auth.principal import Principal
from ferryman.errors import ConflictError, ForbiddenError, NotFoundError
from ferryman.storage.base import IdempotencyStore, KeySettlement
from ferryman.storage.domain.records import Records, Writer
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.filters import ALL, Terms
from ferryman.storage.kernel.model import UNOWNED, principal_term

from .access import Access
from .idempotency import keyed_write

T = TypeVar("T")


class Registrations(Generic[T]):
    """The registrations of one kind, owned by their creators and read through the access policy.

    Args:
        records: The kind's records.
        access: The access policy.
        keyed: Where a registration stores its request's idempotency key with the record, in one write (None:
            registrations take no keys).
    """

    def __init__(self, records: Records[T], access: Access, keyed: IdempotencyStore | None = None) -> None:
        self._records = records
        self._access = access
        self._keyed = keyed
        self._kind = records.kind

    async def find(self, who: Principal | None, record_id: str) -> T | None:
        """The registration, or None when it is missing or ``who`` may not read it."""
        allow = self._access.filter(who, "read", self._kind)
        found = await self._records.find(record_id, allow=allow)
        if found is None and allow != ALL:
            # Storage does not say whether it was missing or hidden: audited as a denial either way.
            self._access.denied(who, "read", self._kind, record_id)
        return None if found is None else found.value

    async def get(self, who: Principal | None, record_id: str) -> T:
        """The registration.

        Raises:
            NotFoundError: it is missing, or ``who`` may not read it.
        """
        found = await self.find(who, record_id)
        if found is None:
            raise NotFoundError(f"{self._kind.noun} '{record_id}' not found")
        return found

    async def list(self, who: Principal | None) -> list[T]:
        """The registrations ``who`` may read, in registration order (filtered by storage)."""
        return await self._records.all(allow=self._access.filter(who, "read", self._kind))

    async def create(self, who: Principal | None, value: T, settle: KeySettlement | None = None) -> None:
        """Register ``value`` as ``who``'s, with ``settle``'s idempotency key outcome in the same write.

        Raises:
            ForbiddenError: the policy does not let ``who`` create it.
            ConflictError: its id is registered already (by anyone).
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        record_id = self._records.id_of(value)
        self._access.check(who, "create", self._kind, record_id)
        await self._records.create(value, owner=self._access.owner(who), write=self._write(settle))
        self._access.record(who, "create", self._kind, record_id)

    async def save(self, who: Principal | None, value: T, settle: KeySettlement | None = None) -> None:
        """Register ``value``, replacing a registration of its id that ``who`` may update (it keeps its owner),
        with ``settle``'s idempotency key outcome in the same write.

        A registration of no owner (made with authentication off) goes to the first caller that registers its
        id again, as a new one.

        Raises:
            ConflictError: another caller's registration holds the id and ``who`` may not update it.
            ForbiddenError: the policy does not let ``who`` create it.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        owner, write = self._access.owner(who), self._write(settle)
        if owner is None:
            await self._records.upsert(value, write=write)
            return
        record_id = self._records.id_of(value)
        existing = await self._records.find(record_id)
        if existing is not None and existing.rec.owner is not None:
            if existing.rec.owner.key == owner.key:
                # Still the caller's when the write runs: not one made by another after this read.
                guard = ops.Check(self._kind, record_id, read=Terms(frozenset({principal_term(owner.key)})))
            else:
                try:
                    self._access.check(who, "update", self._kind, record_id, existing.rec.owner)
                except (NotFoundError, ForbiddenError):
                    raise ConflictError(f"{self._kind.noun} '{record_id}' already exists") from None
                guard = self._access.guard(who, "update", self._kind, record_id)
            upsert = self._records.upsert(value, owner=owner, before=(guard,), write=write)
            await self._changed_meanwhile(upsert, record_id)
            return
        self._access.check(who, "create", self._kind, record_id)
        # Taking an unowned registration: it must still be unowned when the write runs, not another's claim.
        unowned = ops.Check(self._kind, record_id, read=Terms(frozenset({UNOWNED})))
        taken = () if existing is None else (unowned, ops.Delete(self._kind, record_id))
        await self._changed_meanwhile(self._records.create(value, owner=owner, before=taken, write=write), record_id)
        self._access.record(who, "create", self._kind, record_id)

    def _write(self, settle: KeySettlement | None) -> Writer:
        return keyed_write(self._records.kernel, self._keyed, settle)

    async def _changed_meanwhile(self, write: Awaitable[None], record_id: str) -> None:
        """Run a write whose guard checks what :meth:`save` read; another caller's change since is a conflict."""
        try:
            await write
        except (NotFoundError, ForbiddenError):
            raise ConflictError(f"{self._kind.noun} '{record_id}' already exists") from None

    async def delete(self, who: Principal | None, record_id: str) -> bool:
        """Forget a registration; whether it existed (the server itself may forget any).

        Raises:
            NotFoundError: ``who`` may not read it (missing to it too).
            ForbiddenError: it may read it but not delete it.
        """
        guard = () if who is None else (self._access.guard(who, "delete", self._kind, record_id),)
        with self._access.audited(who, "delete", self._kind, record_id):
            existed = await self._records.delete(record_id, before=guard)
        if existed:
            self._access.record(who, "delete", self._kind, record_id)
        return existed
