"""The PostgreSQL table of idempotency keys."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from .base import IdempotencyRecord

# Expired records count as absent; each claim also deletes a few of them for good.
# SKIP LOCKED: claims running at once never wait on (or deadlock over) each other's sweep.
_SWEEP = (
    "DELETE FROM idempotency_keys WHERE ctid IN (SELECT ctid FROM idempotency_keys "
    "WHERE expires_at <= $1 LIMIT 100 FOR UPDATE SKIP LOCKED)"
)


def _record(row: Any) -> IdempotencyRecord:
    return IdempotencyRecord(row[0], row[1], row[2], row[3], row[4], row[5], row[6])


class PgIdempotencyTables:
    """Idempotency keys over an asyncpg pool."""

    _pool: asyncpg.Pool

    async def claim_idempotency_key(self, claim: IdempotencyRecord, now: datetime) -> IdempotencyRecord | None:
        """Store a pending claim unless a live record holds its key; return that record, or None."""
        async with self._pool.acquire() as c:
            await c.execute(_SWEEP, now)
            async with c.transaction():
                await c.execute(
                    "DELETE FROM idempotency_keys WHERE owner = $1 AND idempotency_key = $2 AND expires_at <= $3",
                    claim.owner,
                    claim.key,
                    now,
                )
                # A claim racing this one waits for it here, then inserts nothing.
                inserted = await c.fetchval(
                    "INSERT INTO idempotency_keys (owner, idempotency_key, token, fingerprint, created_at, expires_at) "
                    "VALUES ($1, $2, $3, $4, $5, $6) "
                    "ON CONFLICT (owner, idempotency_key) DO NOTHING RETURNING 1",
                    claim.owner,
                    claim.key,
                    claim.token,
                    claim.fingerprint,
                    claim.created_at,
                    claim.expires_at,
                )
                if inserted:
                    return None
                row = await c.fetchrow(
                    "SELECT owner, idempotency_key, token, fingerprint, created_at, expires_at, result "
                    "FROM idempotency_keys WHERE owner = $1 AND idempotency_key = $2",
                    claim.owner,
                    claim.key,
                )
        # Deleted between the insert and the select (released by its claimer): the key is free again.
        return _record(row) if row is not None else await self.claim_idempotency_key(claim, now)

    async def renew_idempotency_key(self, claim: IdempotencyRecord, expires_at: datetime) -> bool:
        """Move a pending claim's expiry; False if its record is gone or has its result."""
        status = await self._pool.execute(
            "UPDATE idempotency_keys SET expires_at = $1 "
            "WHERE owner = $2 AND idempotency_key = $3 AND token = $4 AND result IS NULL",
            expires_at,
            claim.owner,
            claim.key,
            claim.token,
        )
        return not status.endswith(" 0")

    async def complete_idempotency_key(self, claim: IdempotencyRecord, result: str, expires_at: datetime) -> bool:
        """Store the claim's outcome and new expiry; False if the claim no longer holds the key."""
        status = await self._pool.execute(
            "UPDATE idempotency_keys SET result = $1, expires_at = $2 "
            "WHERE owner = $3 AND idempotency_key = $4 AND token = $5",
            result,
            expires_at,
            claim.owner,
            claim.key,
            claim.token,
        )
        return not status.endswith(" 0")

    async def release_idempotency_key(self, claim: IdempotencyRecord) -> None:
        """Delete the claim's record if it has no result yet."""
        await self._pool.execute(
            "DELETE FROM idempotency_keys WHERE owner = $1 AND idempotency_key = $2 AND token = $3 AND result IS NULL",
            claim.owner,
            claim.key,
            claim.token,
        )
