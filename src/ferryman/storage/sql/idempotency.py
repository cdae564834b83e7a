"""Idempotency keys of requests, scoped by owner."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from ferryman.errors import IdempotencyKeyInUseError

from ..base import IdempotencyKeyHeldError, IdempotencyRecord, KeySettlement
from ..kernel.ops import Op
from .kernel import SqlKernel
from .seam import Dialect, Driver, Row, Work, count, first

_KEY = "owner = :owner AND idempotency_key = :key"


def settled(dialect: Dialect, settle: KeySettlement | None) -> Work[None]:
    """Store ``settle``'s outcome with its key in the unit that runs this (nothing without one).

    Raises:
        IdempotencyKeyInUseError: the claim no longer holds the key (it lapsed, and another call took it):
            the unit writes nothing.
    """
    if settle is None:
        return
    claim = settle.claim
    updated = yield count(
        f"UPDATE idempotency_keys SET result = :result, expires_at = :expires_at WHERE {_KEY} "  # noqa: S608
        "AND token = :token AND result IS NULL",
        result=settle.result,
        expires_at=dialect.epoch(settle.expires_at),
        owner=claim.owner,
        key=claim.key,
        token=claim.token,
    )
    if not updated:
        raise IdempotencyKeyInUseError("another request with this Idempotency-Key took it over; retry later")


def claimed(dialect: Dialect, settle: KeySettlement | None) -> Work[None]:
    """Claim ``settle``'s key, when it claims (``settle.claiming``), first in the unit that runs this; the unit
    stores its outcome later (:func:`settled`).

    Raises:
        IdempotencyKeyHeldError: an earlier call holds the key (the unit writes nothing).
        IdempotencyKeyInUseError: its holder gave it back meanwhile; a retry claims it.
    """
    if settle is None or not settle.claiming:
        return
    claim = settle.claim
    held = yield from _claim(dialect, claim, claim.created_at)
    if held is True:
        return
    if held is None:
        raise IdempotencyKeyInUseError("the request that held this Idempotency-Key gave it back; retry")
    raise IdempotencyKeyHeldError(held[3], held[6], held[2])


def _claim(d: Dialect, claim: IdempotencyRecord, now: datetime) -> Work[Literal[True] | Row | None]:
    """Store a pending claim unless a live record holds its key: True, else the holder's row (None: the holder
    gave it back between the two statements)."""
    where = {"owner": claim.owner, "key": claim.key}
    # Expired records count as absent. This key's own goes first: a unit that waits
    # (here or on the insert) holds no row another one sweeps, so none deadlock.
    yield count(f"DELETE FROM idempotency_keys WHERE {_KEY} AND expires_at <= :now", now=d.epoch(now), **where)  # noqa: S608
    yield count(d.sweep_expired_keys, now=d.epoch(now))
    # A claim racing this one waits for it here, then inserts nothing.
    inserted = yield first(
        "INSERT INTO idempotency_keys (owner, idempotency_key, token, fingerprint, created_at, expires_at) "
        "VALUES (:owner, :key, :token, :fingerprint, :created_at, :expires_at) "
        "ON CONFLICT (owner, idempotency_key) DO NOTHING RETURNING 1",
        token=claim.token,
        fingerprint=claim.fingerprint,
        created_at=d.epoch(claim.created_at),
        expires_at=d.epoch(claim.expires_at),
        **where,
    )
    if inserted:
        return True
    held: Row | None = yield first(
        "SELECT owner, idempotency_key, token, fingerprint, created_at, expires_at, result "  # noqa: S608
        f"FROM idempotency_keys WHERE {_KEY}",
        **where,
    )
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
        updated = await self._db.write(
            count(
                f"UPDATE idempotency_keys SET expires_at = :expires_at WHERE {_KEY} "  # noqa: S608
                "AND token = :token AND result IS NULL",
                expires_at=self._db.dialect.epoch(expires_at),
                owner=claim.owner,
                key=claim.key,
                token=claim.token,
            )
        )
        return updated > 0

    async def complete_idempotency_key(self, claim: IdempotencyRecord, result: str, expires_at: datetime) -> bool:
        """Store the claim's outcome and new expiry; False if the claim no longer holds the key."""
        updated = await self._db.write(
            count(
                f"UPDATE idempotency_keys SET result = :result, expires_at = :expires_at WHERE {_KEY} "  # noqa: S608
                "AND token = :token",
                result=result,
                expires_at=self._db.dialect.epoch(expires_at),
                owner=claim.owner,
                key=claim.key,
                token=claim.token,
            )
        )
        return updated > 0

    async def release_idempotency_key(self, claim: IdempotencyRecord) -> None:
        """Delete the claim's record if it has no result yet."""
        await self._delete(claim, " AND result IS NULL")

    async def forget_idempotency_key(self, claim: IdempotencyRecord) -> None:
        """Delete the claim's record, result or not."""
        await self._delete(claim, "")

    async def _delete(self, claim: IdempotencyRecord, condition: str) -> None:
        await self._db.write(
            count(
                f"DELETE FROM idempotency_keys WHERE {_KEY} AND token = :token{condition}",  # noqa: S608
                owner=claim.owner,
                key=claim.key,
                token=claim.token,
            )
        )
