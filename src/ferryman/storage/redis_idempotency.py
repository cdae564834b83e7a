"""Idempotency keys in Redis: one hash per key, which Redis drops when it expires."""

from __future__ import annotations

from datetime import UTC, datetime

from .base import IdempotencyRecord
from .redis_scripts import RedisBase


def record_id(owner: str, key: str) -> str:
    """The id of a key's record: the owner's length first, so that no owner and key make another's id."""
    return f"{len(owner)}:{owner}:{key}"


def _epoch(moment: datetime) -> str:
    return repr(moment.timestamp())


def _time(epoch: str) -> datetime:
    return datetime.fromtimestamp(float(epoch), UTC)


class RedisIdempotency(RedisBase):
    """Idempotency keys over the backend's scripts."""

    async def claim_idempotency_key(self, claim: IdempotencyRecord, now: datetime) -> IdempotencyRecord | None:
        """Store a pending claim unless a live record holds its key; return that record, or None."""
        reply = await self._run(
            "claim_idempotency_key",
            record_id(claim.owner, claim.key),
            _epoch(now),
            claim.token,
            claim.fingerprint,
            _epoch(claim.created_at),
            _epoch(claim.expires_at),
        )
        if reply[0] == "ok":
            return None
        token, fingerprint, created, expires, done, result = reply[1:]
        return IdempotencyRecord(
            claim.owner, claim.key, token, fingerprint, _time(created), _time(expires), result if done == "1" else None
        )

    async def _update(self, claim: IdempotencyRecord, expires_at: datetime, result: str | None) -> bool:
        reply = await self._run(
            "update_idempotency_key",
            record_id(claim.owner, claim.key),
            claim.token,
            _epoch(expires_at),
            "0" if result is None else "1",
            result or "",
        )
        return bool(reply[0] == "ok")

    async def renew_idempotency_key(self, claim: IdempotencyRecord, expires_at: datetime) -> bool:
        """Move a pending claim's expiry; False if its record is gone or has its result."""
        return await self._update(claim, expires_at, None)

    async def complete_idempotency_key(self, claim: IdempotencyRecord, result: str, expires_at: datetime) -> bool:
        """Store the claim's outcome and new expiry; False if the claim no longer holds the key."""
        return await self._update(claim, expires_at, result)

    async def release_idempotency_key(self, claim: IdempotencyRecord) -> None:
        """Delete the claim's record if it has no result yet."""
        await self._run("release_idempotency_key", record_id(claim.owner, claim.key), claim.token)
