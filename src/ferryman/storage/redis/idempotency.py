"""Idempotency keys in Redis: one hash per key, which Redis drops when it expires."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ferryman.storage.base import IdempotencyRecord, KeySettlement
from ferryman.storage.kernel.ops import Op
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.storage.redis.lua_idempotency import (
    CLAIM,
    KEYED_WRITE,
    RELEASE,
    UPDATE,
    Claim,
    KeyedWrite,
    Release,
    Update,
)
from ferryman.storage.redis.scripts import RedisBase


def record_id(owner: str, key: str) -> str:
    """The id of a key's record: the owner's length first, so that no owner and key make another's id."""
    return f"{len(owner)}:{owner}:{key}"


def settlement_args(settle: KeySettlement | None) -> dict[str, Any]:
    """The ``SettlesKey`` arguments of a script that completes ``settle`` (none: the script completes no key)."""
    if settle is None:
        return {}
    claim = settle.claim
    return {
        "key_record": record_id(claim.owner, claim.key),
        "key_token": claim.token,
        "key_result": settle.result,
        "key_expires": settle.expires_at.timestamp(),
        "key_claiming": settle.claiming,
        "key_fingerprint": claim.fingerprint,
        "key_created": claim.created_at.timestamp(),
    }


def _time(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


class RedisIdempotency(RedisBase):
    """Idempotency keys over the backend's scripts."""

    kernel: RedisKernel

    async def write_keyed(self, ops: Sequence[Op], settle: KeySettlement) -> list[Any]:
        """Run a kernel write batch and store ``settle``'s key outcome with it, in one script."""
        args = KeyedWrite(**self.kernel.embedded(ops), **settlement_args(settle))
        return self.kernel.embedded_results(ops, await self._run(KEYED_WRITE, args))

    async def claim_idempotency_key(self, claim: IdempotencyRecord, now: datetime) -> IdempotencyRecord | None:
        """Store a pending claim unless a live record holds its key; return that record, or None."""
        holder = await self._run(
            CLAIM,
            Claim(
                record_id=record_id(claim.owner, claim.key),
                now=now.timestamp(),
                token=claim.token,
                fingerprint=claim.fingerprint,
                created_at=claim.created_at.timestamp(),
                expires_at=claim.expires_at.timestamp(),
            ),
        )
        if holder is None:
            return None
        return IdempotencyRecord(
            claim.owner,
            claim.key,
            holder.token,
            holder.fingerprint,
            _time(holder.created_at),
            _time(holder.expires_at),
            holder.result,
        )

    async def _update(self, claim: IdempotencyRecord, expires_at: datetime, result: str | None) -> bool:
        update = Update(
            record_id=record_id(claim.owner, claim.key),
            token=claim.token,
            expires_at=expires_at.timestamp(),
            complete=result is not None,
            result=result or "",
        )
        return await self._run(UPDATE, update)

    async def renew_idempotency_key(self, claim: IdempotencyRecord, expires_at: datetime) -> bool:
        """Move a pending claim's expiry; False if its record is gone or has its result."""
        return await self._update(claim, expires_at, None)

    async def complete_idempotency_key(self, claim: IdempotencyRecord, result: str, expires_at: datetime) -> bool:
        """Store the claim's outcome and new expiry; False if the claim no longer holds the key."""
        return await self._update(claim, expires_at, result)

    async def release_idempotency_key(self, claim: IdempotencyRecord) -> None:
        """Delete the claim's record if it has no result yet."""
        await self._run(RELEASE, Release(record_id=record_id(claim.owner, claim.key), token=claim.token))

    async def forget_idempotency_key(self, claim: IdempotencyRecord) -> None:
        """Delete the claim's record, result or not."""
        await self._run(RELEASE, Release(record_id(claim.owner, claim.key), claim.token, whatever=True))
