"""API keys in Redis: one hash of records by name, one of names by key hash (the lookup on every request)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import cast

from ferryman.errors import ConflictError

from . import codec
from .base import ApiKeyRecord
from .redis_keys import API_KEY_HASHES, API_KEYS
from .redis_scripts import RedisBase


def _dump(key: ApiKeyRecord) -> str:
    return json.dumps(
        {
            "key_hash": key.key_hash,
            "attributes": {kind: list(values) for kind, values in key.attributes.items()},
            "created_at": codec.dump_time(key.created_at),
            "revoked_at": codec.dump_time(key.revoked_at),
        }
    )


def _load(name: str, body: str) -> ApiKeyRecord:
    data = json.loads(body)
    created_at = codec.load_time(data["created_at"])
    assert created_at is not None, "a stored API key has its creation time"
    attributes = {kind: tuple(values) for kind, values in data["attributes"].items()}
    return ApiKeyRecord(name, data["key_hash"], attributes, created_at, codec.load_time(data["revoked_at"]))


class RedisApiKeys(RedisBase):
    """API keys over the backend's client."""

    async def create_api_key(self, key: ApiKeyRecord) -> None:
        """Store a new key; ConflictError if its name is taken."""
        # The name is claimed with the whole record in one command; the hash index follows.
        # Until it does (or if this replica stops first) the key is refused: it fails closed.
        if not await self._db.hsetnx(self._keys.global_(API_KEYS), key.name, _dump(key)):
            raise ConflictError(f"an API key named '{key.name}' exists")
        await self._db.hset(self._keys.global_(API_KEY_HASHES), key.key_hash, key.name)

    async def api_key_by_hash(self, key_hash: str) -> ApiKeyRecord | None:
        """The key with this hash, revoked or not."""
        name = cast(str | None, await self._db.hget(self._keys.global_(API_KEY_HASHES), key_hash))
        if name is None:
            return None
        body = cast(str | None, await self._db.hget(self._keys.global_(API_KEYS), name))
        if body is None:
            return None
        record = _load(name, body)
        return record if record.key_hash == key_hash else None

    async def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, by name."""
        bodies = cast(dict[str, str], await self._db.hgetall(self._keys.global_(API_KEYS)))
        return [_load(name, bodies[name]) for name in sorted(bodies)]

    async def revoke_api_key(self, name: str, at: datetime) -> bool:
        """Mark the named key revoked (keeping an earlier revocation's time); False if there is none."""
        body = cast(str | None, await self._db.hget(self._keys.global_(API_KEYS), name))
        if body is None:
            return False
        record = _load(name, body)
        if record.revoked_at is None:
            revoked = ApiKeyRecord(record.name, record.key_hash, record.attributes, record.created_at, at)
            await self._db.hset(self._keys.global_(API_KEYS), name, _dump(revoked))
        return True
