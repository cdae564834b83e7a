"""Registrations in SQL: one row each, the registration as JSON under its caller-chosen id, in insertion order.

Toolgroups and shields registered at run time share this layout; each kind names its table and id column
(constants of this package, never a caller's text).
"""

from __future__ import annotations

from datetime import UTC, datetime

from .seam import Driver, count, first, rows


class RegistryTables:
    """Registrations of any kind, over a :class:`Driver`."""

    _db: Driver

    async def _register(self, table: str, id_column: str, entry_id: str, body: str) -> bool:
        """Store a new entry; return False (nothing written) if its id is taken."""
        inserted = await self._db.write(
            count(
                f"INSERT INTO {table} ({id_column}, body, created_at) VALUES (:entry_id, :body, :created_at) "  # noqa: S608
                f"ON CONFLICT ({id_column}) DO NOTHING",
                entry_id=entry_id,
                body=body,
                created_at=self._db.dialect.stamp(datetime.now(UTC)),
            )
        )
        return bool(inserted)

    async def _registration(self, table: str, id_column: str, entry_id: str) -> str | None:
        """One entry's body, or None."""
        row = await self._db.read(
            first(f"SELECT body FROM {table} WHERE {id_column} = :entry_id", entry_id=entry_id)  # noqa: S608
        )
        return None if row is None else str(row[0])

    async def _registrations(self, table: str) -> list[str]:
        """Every entry's body, in registration order."""
        return [str(row[0]) for row in await self._db.read(rows(f"SELECT body FROM {table} ORDER BY id"))]  # noqa: S608

    async def _unregister(self, table: str, id_column: str, entry_id: str) -> bool:
        """Forget an entry; return whether it existed."""
        deleted = await self._db.write(
            count(f"DELETE FROM {table} WHERE {id_column} = :entry_id", entry_id=entry_id)  # noqa: S608
        )
        return deleted > 0
