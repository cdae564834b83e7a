"""Owners of records: one row per ``(kind, id)``, for every kind of record.

The ``principal`` column is the owner's qualified name (``key:NAME`` or ``sub:ID``), unique across namespaces.
"""

from __future__ import annotations

from ..kernel.model import Owner
from ..owners import dump_owner, load_owner
from .seam import Driver, Work, count, rows


def stamp_owner(kind: str, record_id: str, owner: Owner) -> Work[None]:
    """Record (or replace) the owner of a record, in the unit of work that yields from this."""
    params = {"kind": kind, "record_id": record_id, "principal": owner.key, "owner": dump_owner(owner)}
    # Portable upsert: the row is the unit's own once deleted (PostgreSQL locks, SQLite is serial).
    yield count("DELETE FROM record_owners WHERE kind = :kind AND record_id = :record_id", **params)
    yield count(
        "INSERT INTO record_owners (kind, record_id, principal, owner) VALUES (:kind, :record_id, :principal, :owner)",
        **params,
    )


class OwnerTables:
    """Record owners, over a :class:`Driver`."""

    _db: Driver

    async def set_owner(self, kind: str, record_id: str, owner: Owner) -> None:
        """Record (or replace) the owner of a record."""
        await self._db.write(stamp_owner(kind, record_id, owner))

    async def owners_of(self, kind: str, record_ids: list[str]) -> dict[str, Owner]:
        """The owners of those of these records that have one."""
        if not record_ids:
            return {}
        d = self._db.dialect
        found = await self._db.read(
            rows(
                "SELECT record_id, owner FROM record_owners "  # noqa: S608
                f"WHERE kind = :kind AND {d.any_of('record_id', 'ids')}",
                kind=kind,
                ids=d.array(sorted(set(record_ids))),
            )
        )
        return {row[0]: load_owner(row[1]) for row in found}

    async def forget_owner(self, kind: str, record_id: str) -> None:
        """Drop a deleted record's owner."""
        await self._db.write(
            count(
                "DELETE FROM record_owners WHERE kind = :kind AND record_id = :record_id",
                kind=kind,
                record_id=record_id,
            )
        )
