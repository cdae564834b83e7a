"""API keys over the kernel: one record per key, by name, found by the hash of the key on every request.

A key's record is ``api_key`` ``<name>``, unowned (keys are made by an operator,
not by a caller), created at the key's creation time, with the body
``{"name", "key_hash", "attributes": {kind: [values]}, "created_at", "revoked_at"}``
(times in seconds since the epoch). ``key_hash`` is an index, so the lookup on
every request is one indexed read.

The kernel makes names unique. Hashes are not checked for uniqueness: a key is
32 random bytes, and two keys with one SHA-256 do not happen; were they to, the
lookup answers the older key.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ferryman.errors import ConflictError
from ferryman.storage.domain.kinds import API_KEY
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Json, Rec
from ferryman.storage.kernel.protocol import Kernel


@dataclass(frozen=True)
class ApiKeyRecord:
    """An API key as stored: its hash (never the key), its name, what it grants, and whether it was revoked.

    ``attributes`` are the principal's (``roles``, ``teams``…); the key acts as
    the API-key principal named ``name`` (``key:NAME``, apart from every token subject).
    """

    name: str
    key_hash: str
    attributes: dict[str, tuple[str, ...]]
    created_at: datetime
    revoked_at: datetime | None = None


def _body(key: ApiKeyRecord) -> Json:
    return {
        "name": key.name,
        "key_hash": key.key_hash,
        "attributes": {kind: list(values) for kind, values in key.attributes.items()},
        "created_at": key.created_at.timestamp(),
        "revoked_at": None if key.revoked_at is None else key.revoked_at.timestamp(),
    }


def _time(value: Any) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(float(value), UTC)


def _record(rec: Rec) -> ApiKeyRecord:
    body = rec.body
    attributes = {str(kind): tuple(str(v) for v in values) for kind, values in body["attributes"].items()}
    created_at = _time(body.get("created_at"))
    return ApiKeyRecord(
        rec.id,
        str(body["key_hash"]),
        attributes,
        created_at if created_at is not None else datetime.fromtimestamp(rec.at, UTC),
        _time(body.get("revoked_at")),
    )


class ApiKeys:
    """The API keys of one kernel.

    Args:
        kernel: The backend (the server's store's ``kernel``).
    """

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    async def create(self, key: ApiKeyRecord) -> None:
        """Store a new key.

        Raises:
            ConflictError: a key of this name exists, revoked or not.
        """
        put = ops.Put(API_KEY, key.name, _body(key), at=key.created_at.timestamp())
        try:
            await self.kernel.write([put])
        except ConflictError as exc:
            raise ConflictError(f"an API key named '{key.name}' exists") from exc

    async def by_hash(self, key_hash: str) -> ApiKeyRecord | None:
        """The key with this hash, revoked or not; None if there is none."""
        (found,) = await self.kernel.read([ops.Page(API_KEY, where=("key_hash", key_hash), limit=1)])
        return _record(found.items[0]) if found.items else None

    async def list(self) -> list[ApiKeyRecord]:
        """Every key, revoked ones too, by name."""
        (found,) = await self.kernel.read([ops.Page(API_KEY)])
        return sorted((_record(rec) for rec in found.items), key=lambda key: key.name)

    async def revoke(self, name: str, at: datetime) -> bool:
        """Mark the named key revoked; False if there is none.

        A key revoked already keeps its first revocation's time. Two revocations at once may both find it
        active, and the later write's time stays: either way the key is revoked from the first write on.
        """
        (found,) = await self.kernel.read([ops.Get(API_KEY, name)])
        if found is None:
            return False
        if found.body.get("revoked_at") is None:
            await self.kernel.write([ops.Patch(API_KEY, name, merge={"revoked_at": at.timestamp()}, required=False)])
        return True
