"""The SQLite table of idempotency keys."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from .base import IdempotencyRecord
from .sqlite_conn import SqliteRunner


def _record(row: tuple[str, str, str, str, float, float, str | None]) -> IdempotencyRecord:
    created, expires = (datetime.fromtimestamp(value, UTC) for value in (row[4], row[5]))
    return IdempotencyRecord(row[0], row[1], row[2], row[3], created, expires, row[6])


class IdempotencyTables:
    """Idempotency keys, over a :class:`SqliteRunner`."""

    _db: SqliteRunner

    async def claim_idempotency_key(self, claim: IdempotencyRecord, now: datetime) -> IdempotencyRecord | None:
        """Store a pending claim unless a live record holds its key; return that record, or None."""
        where = (claim.owner, claim.key)

        def work(c: sqlite3.Connection) -> IdempotencyRecord | None:
            # Expired records count as absent: sweep them all (the index keeps it cheap).
            c.execute("DELETE FROM idempotency_keys WHERE expires_at <= ?", (now.timestamp(),))
            row = c.execute(
                "SELECT owner, idempotency_key, token, fingerprint, created_at, expires_at, result "
                "FROM idempotency_keys WHERE owner = ? AND idempotency_key = ?",
                where,
            )
            held = row.fetchone()
            if held is not None:
                return _record(held)
            c.execute(
                "INSERT INTO idempotency_keys (owner, idempotency_key, token, fingerprint, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (*where, claim.token, claim.fingerprint, claim.created_at.timestamp(), claim.expires_at.timestamp()),
            )
            return None

        return await self._db.write(work)

    async def renew_idempotency_key(self, claim: IdempotencyRecord, expires_at: datetime) -> bool:
        """Move a pending claim's expiry; False if its record is gone or has its result."""
        updated: int = await self._db.write(
            lambda c: (
                c.execute(
                    "UPDATE idempotency_keys SET expires_at = ? "
                    "WHERE owner = ? AND idempotency_key = ? AND token = ? AND result IS NULL",
                    (expires_at.timestamp(), claim.owner, claim.key, claim.token),
                ).rowcount
            )
        )
        return updated > 0

    async def complete_idempotency_key(self, claim: IdempotencyRecord, result: str, expires_at: datetime) -> bool:
        """Store the claim's outcome and new expiry; False if the claim no longer holds the key."""
        updated: int = await self._db.write(
            lambda c: (
                c.execute(
                    "UPDATE idempotency_keys SET result = ?, expires_at = ? "
                    "WHERE owner = ? AND idempotency_key = ? AND token = ?",
                    (result, expires_at.timestamp(), claim.owner, claim.key, claim.token),
                ).rowcount
            )
        )
        return updated > 0

    async def release_idempotency_key(self, claim: IdempotencyRecord) -> None:
        """Delete the claim's record if it has no result yet."""
        await self._db.write(
            lambda c: c.execute(
                "DELETE FROM idempotency_keys WHERE owner = ? AND idempotency_key = ? AND token = ? AND result IS NULL",
                (claim.owner, claim.key, claim.token),
            )
        )
