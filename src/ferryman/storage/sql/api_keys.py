"""API keys by hash (the primary key: one indexed read per request), with their names unique."""

from __future__ import annotations

import json
from datetime import datetime

from ferryman.errors import ConflictError

from ..base import ApiKeyRecord
from .seam import Driver, Row, UniqueViolation, Work, count, first, rows

_COLUMNS = "name, key_hash, attributes, created_at, revoked_at"


class ApiKeyTables:
    """API keys, over a :class:`Driver`."""

    _db: Driver

    def _key(self, row: Row) -> ApiKeyRecord:
        d = self._db.dialect
        attributes = {kind: tuple(values) for kind, values in json.loads(row[2]).items()}
        revoked = d.read_epoch(row[4]) if row[4] is not None else None
        return ApiKeyRecord(row[0], row[1], attributes, d.read_epoch(row[3]), revoked)

    async def create_api_key(self, key: ApiKeyRecord) -> None:
        """Store a new key; ConflictError if its name (or hash) is taken."""
        d = self._db.dialect

        def work() -> Work[None]:
            try:
                yield count(
                    f"INSERT INTO api_keys ({_COLUMNS}) "  # noqa: S608
                    "VALUES (:name, :key_hash, :attributes, :created_at, :revoked_at)",
                    name=key.name,
                    key_hash=key.key_hash,
                    attributes=json.dumps({kind: list(values) for kind, values in key.attributes.items()}),
                    created_at=d.epoch(key.created_at),
                    revoked_at=d.epoch(key.revoked_at),
                )
            except UniqueViolation as exc:
                raise ConflictError(f"an API key named '{key.name}' exists") from exc

        await self._db.write(work())

    async def api_key_by_hash(self, key_hash: str) -> ApiKeyRecord | None:
        """The key with this hash, revoked or not."""
        row = await self._db.read(first(f"SELECT {_COLUMNS} FROM api_keys WHERE key_hash = :h", h=key_hash))  # noqa: S608
        return None if row is None else self._key(row)

    async def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, by name."""
        found = await self._db.read(rows(f"SELECT {_COLUMNS} FROM api_keys ORDER BY name"))  # noqa: S608
        return [self._key(row) for row in found]

    async def revoke_api_key(self, name: str, at: datetime) -> bool:
        """Mark the named key revoked (keeping an earlier revocation's time); False if there is none."""

        def work() -> Work[bool]:
            yield count(
                "UPDATE api_keys SET revoked_at = :at WHERE name = :name AND revoked_at IS NULL",
                at=self._db.dialect.epoch(at),
                name=name,
            )
            found = yield first("SELECT 1 FROM api_keys WHERE name = :name", name=name)
            return found is not None

        return await self._db.write(work())
