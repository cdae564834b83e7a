"""Idempotency keys of requests, scoped by owner."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa

from ferryman.errors import IdempotencyKeyInUseError
from ferryman.storage.base import IdempotencyKeyHeldError, IdempotencyRecord, KeySettlement
from ferryman.storage.kernel.ops import Op
from ferryman.storage.sql.dialects import Compiled, SqlDialect, p
from ferryman.storage.sql.domain_tables import idempotency_keys
from ferryman.storage.sql.kernel import SqlKernel
from ferryman.storage.sql.seam import Driver, Row, Work

K = idempotency_keys.c
SWEPT = 100
"""Expired keys one claim deletes at most (PostgreSQL; SQLite's lone writer sweeps them all: the expiry index
keeps that cheap)."""


def _key() -> sa.ColumnElement[bool]:
    return sa.and_(K.owner == p("owner"), K.idempotency_key == p("key"))


def _claims() -> sa.ColumnElement[bool]:
    """The key's record, of this claim (its token)."""
    return sa.and_(_key(), K.token == p("token"))


def _settle(d: SqlDialect, *, pending: bool) -> Compiled:
    """Store ``:result`` and ``:expires_at`` with the claim's record; ``pending``: only while it has no result."""

    def build() -> sa.Update:
        where = sa.and_(_claims(), K.result.is_(None)) if pending else _claims()
        return sa.update(idempotency_keys).where(where).values(result=p("result"), expires_at=p("expires_at"))

    return d.compiled(("idem.settle", pending), build)


def _renew(d: SqlDialect) -> Compiled:
    return d.compiled(
        "idem.renew",
        lambda: sa.update(idempotency_keys).where(_claims(), K.result.is_(None)).values(expires_at=p("expires_at")),
    )


def _delete(d: SqlDialect, *, pending: bool) -> Compiled:
    """Delete the claim's record; ``pending``: only while it has no result."""
    return d.compiled(
        ("idem.delete", pending),
        lambda: sa.delete(idempotency_keys).where(sa.and_(_claims(), K.result.is_(None)) if pending else _claims()),
    )


def _expired_own(d: SqlDialect) -> Compiled:
    return d.compiled("idem.expired_own", lambda: sa.delete(idempotency_keys).where(_key(), K.expires_at <= p("now")))


def _sweep(d: SqlDialect) -> Compiled:
    """Delete keys expired by ``:now``; on PostgreSQL some of them, never waiting on another sweep."""

    def build() -> sa.Delete:
        expired = K.expires_at <= p("now")
        if d.is_sqlite:
            return sa.delete(idempotency_keys).where(expired)
        some = sa.select(K.owner, K.idempotency_key).where(expired).limit(SWEPT).with_for_update(skip_locked=True)
        return sa.delete(idempotency_keys).where(sa.tuple_(K.owner, K.idempotency_key).in_(some))

    return d.compiled("idem.sweep", build)


def _insert(d: SqlDialect) -> Compiled:
    """The claim's record unless one holds its key; returns a row when inserted."""
    columns = ("owner", "idempotency_key", "token", "fingerprint", "created_at", "expires_at")

    def build() -> sa.Insert:
        values = {column: p(column) for column in columns}
        insert = (
            d.insert(idempotency_keys)
            .values(values)
            .on_conflict_do_nothing(index_elements=[K.owner, K.idempotency_key])
        )
        return insert.returning(sa.literal_column("1"))

    return d.compiled("idem.insert", build)


def _held(d: SqlDialect) -> Compiled:
    return d.compiled(
        "idem.held",
        lambda: sa.select(
            K.owner, K.idempotency_key, K.token, K.fingerprint, K.created_at, K.expires_at, K.result
        ).where(_key()),
    )


def settled(d: SqlDialect, settle: KeySettlement | None) -> Work[None]:
    """Store ``settle``'s outcome with its key in the unit that runs this (nothing without one).

    Raises:
        IdempotencyKeyInUseError: the claim no longer holds the key (it lapsed, and another call took it):
            the unit writes nothing.
    """
    if settle is None:
        return
    claim = settle.claim
    updated = yield _settle(d, pending=True).count(
        result=settle.result,
        expires_at=d.epoch(settle.expires_at),
        owner=claim.owner,
        key=claim.key,
        token=claim.token,
    )
    if not updated:
        raise IdempotencyKeyInUseError("another request with this Idempotency-Key took it over; retry later")


def claimed(d: SqlDialect, settle: KeySettlement | None) -> Work[None]:
    """Claim ``settle``'s key, when it claims (``settle.claiming``), first in the unit that runs this; the unit
    stores its outcome later (:func:`settled`).

    Raises:
        IdempotencyKeyHeldError: an earlier call holds the key (the unit writes nothing).
        IdempotencyKeyInUseError: its holder gave it back meanwhile; a retry claims it.
    """
    if settle is None or not settle.claiming:
        return
    claim = settle.claim
    held = yield from _claim(d, claim, claim.created_at)
    if held is True:
        return
    if held is None:
        raise IdempotencyKeyInUseError("the request that held this Idempotency-Key gave it back; retry")
    raise IdempotencyKeyHeldError(held[3], held[6], held[2])


def _claim(d: SqlDialect, claim: IdempotencyRecord, now: datetime) -> Work[Literal[True] | Row | None]:
    """Store a pending claim unless a live record holds its key: True, else the holder's row (None: the holder
    gave it back between the two statements)."""
    where = {"owner": claim.owner, "key": claim.key}
    # Expired records count as absent. This key's own goes first: a unit that waits
    # (here or on the insert) holds no row another one sweeps, so none deadlock.
    yield _expired_own(d).count(now=d.epoch(now), **where)
    yield _sweep(d).count(now=d.epoch(now))
    # A claim racing this one waits for it here, then inserts nothing.
    inserted = yield _insert(d).first(
        owner=claim.owner,
        idempotency_key=claim.key,
        token=claim.token,
        fingerprint=claim.fingerprint,
        created_at=d.epoch(claim.created_at),
        expires_at=d.epoch(claim.expires_at),
    )
    if inserted:
        return True
    held: Row | None = yield _held(d).first(**where)
    return held


class IdempotencyTables:
    """Idempotency keys, over a :class:`Driver`."""

    _db: Driver
    kernel: SqlKernel

    async def write_keyed(self, ops: Sequence[Op], settle: KeySettlement) -> list[Any]:
        """Run a kernel write batch and store ``settle``'s key outcome with it, in one transaction."""
        d, batch = self._db.dialect, self.kernel.writes_within(ops)

        def work() -> Work[list[Any]]:
            yield from claimed(d, settle)  # first: a repeat finds the key held and writes nothing
            results = yield from batch
            yield from settled(d, settle)
            return results

        return await self._db.write(work())

    def _record(self, row: Row) -> IdempotencyRecord:
        d = self._db.dialect
        return IdempotencyRecord(row[0], row[1], row[2], row[3], d.read_epoch(row[4]), d.read_epoch(row[5]), row[6])

    async def claim_idempotency_key(self, claim: IdempotencyRecord, now: datetime) -> IdempotencyRecord | None:
        """Store a pending claim unless a live record holds its key; return that record, or None."""
        held = await self._db.write(_claim(self._db.dialect, claim, now))
        if held is True:
            return None
        # Released by its claimer between the insert and the select: the key is free again.
        return self._record(held) if held is not None else await self.claim_idempotency_key(claim, now)

    async def renew_idempotency_key(self, claim: IdempotencyRecord, expires_at: datetime) -> bool:
        """Move a pending claim's expiry; False if its record is gone or has its result."""
        d = self._db.dialect
        updated = await self._db.write(
            _renew(d).count(expires_at=d.epoch(expires_at), owner=claim.owner, key=claim.key, token=claim.token)
        )
        return updated > 0

    async def complete_idempotency_key(self, claim: IdempotencyRecord, result: str, expires_at: datetime) -> bool:
        """Store the claim's outcome and new expiry; False if the claim no longer holds the key."""
        d = self._db.dialect
        updated = await self._db.write(
            _settle(d, pending=False).count(
                result=result, expires_at=d.epoch(expires_at), owner=claim.owner, key=claim.key, token=claim.token
            )
        )
        return updated > 0

    async def release_idempotency_key(self, claim: IdempotencyRecord) -> None:
        """Delete the claim's record if it has no result yet."""
        await self._forget(claim, pending=True)

    async def forget_idempotency_key(self, claim: IdempotencyRecord) -> None:
        """Delete the claim's record, result or not."""
        await self._forget(claim, pending=False)

    async def _forget(self, claim: IdempotencyRecord, *, pending: bool) -> None:
        statement = _delete(self._db.dialect, pending=pending)
        await self._db.write(statement.count(owner=claim.owner, key=claim.key, token=claim.token))
