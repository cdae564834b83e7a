"""Redis layout 5: registered models, toolgroups, shields and API keys become records of the storage kernel.

Layout 4 kept each registry in a hash of id -> JSON beside a sorted set of ids by a number drawn at
registration (the order), their owners in the ``owners:<kind>`` hashes, and API keys in a hash of name ->
JSON (times as ISO text) beside a hash of key hash -> name. Each entry is written through the kernel itself
(so its layout is the kernel's), in the old order, with its owner; then the old keys go, a kind at a time.

Every write is an upsert, which keeps an existing record's number, time and owner: a conversion that died
midway, run again, writes the records it had written as they were, then the rest after them.

The old layout kept no registration time: the records of models, toolgroups and shields are created at the
time of the conversion (API keys keep their own).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.storage.domain.kinds import API_KEY, MODEL, SCHEMA, SHIELD, TOOLGROUP
from ferryman.storage.kernel.model import Kind
from ferryman.storage.kernel.ops import Put
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.storage.redis.record_moves import stored_owner
from ferryman.storage.redis.store_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_REGISTRIES = (
    (MODEL, "models", "model_order"),
    (TOOLGROUP, "toolgroups", "toolgroup_order"),
    (SHIELD, "shields", "shield_order"),
)
_OWNERS = "owners"
_API_KEYS = "api_keys"
_API_KEY_HASHES = "api_key_hashes"
_BATCH = 100


def _kernel_prefix(keys: Keys) -> str:
    """Where a store's kernel keeps its keys (as ``RedisStore`` opens it): under the store's prefix."""
    return f"{keys.prefix}k:"


async def move_registries(client: Redis, keys: Keys, lock: Lock) -> None:
    """Write every registration and API key of layout 4 as a kernel record, then delete the old keys."""
    kernel = RedisKernel(client, SCHEMA, prefix=_kernel_prefix(keys))
    await kernel.open()
    try:
        now = time.time()
        for kind, bodies, order in _REGISTRIES:
            await _write(kernel, await _registrations(client, keys, kind, bodies, order, now), lock)
            await _forget(client, keys.global_(bodies), keys.global_(order), keys.of(_OWNERS, kind.name))
        await _write(kernel, await _api_keys(client, keys), lock)
        await _forget(client, keys.global_(_API_KEYS), keys.global_(_API_KEY_HASHES))
    finally:
        await kernel.close()


async def _registrations(client: Redis, keys: Keys, kind: Kind, bodies: str, order: str, now: float) -> list[Put]:
    """The records of one registry, in registration order, with their owners."""
    async with client.pipeline(transaction=True) as pipe:
        pipe.zrange(keys.global_(order), 0, -1)
        pipe.hgetall(keys.global_(bodies))
        pipe.hgetall(keys.of(_OWNERS, kind.name))
        ordered, found, owners = cast(tuple[list[str], dict[str, str], dict[str, str]], await pipe.execute())
    # An entry without its place in the order (never written so by layout 4) still goes, after the others.
    ids = [entry_id for entry_id in ordered if entry_id in found]
    ids += sorted(set(found) - set(ordered))
    return [
        Put(
            kind,
            entry_id,
            _registration(found[entry_id]),
            owner=stored_owner(owners.get(entry_id)),
            mode="upsert",
            at=now,
        )
        for entry_id in ids
    ]


def _registration(stored: str) -> dict[str, Any]:
    """A registration's body: the wire model's full dump as stored, without its null fields (as this version)."""
    return {name: value for name, value in json.loads(stored).items() if value is not None}


async def _api_keys(client: Redis, keys: Keys) -> list[Put]:
    """The records of the API keys, oldest first (then by name)."""
    found = cast(dict[str, str], await client.hgetall(keys.global_(_API_KEYS)))
    bodies = [_api_key(name, json.loads(stored)) for name, stored in found.items()]
    bodies.sort(key=lambda body: (body["created_at"], body["name"]))
    return [Put(API_KEY, body["name"], body, mode="upsert", at=body["created_at"]) for body in bodies]


def _api_key(name: str, stored: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "key_hash": stored["key_hash"],
        "attributes": stored["attributes"],
        "created_at": _epoch(stored["created_at"]),
        "revoked_at": None if stored.get("revoked_at") is None else _epoch(stored["revoked_at"]),
    }


def _epoch(iso: str) -> float:
    moment = datetime.fromisoformat(iso)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


async def _write(kernel: RedisKernel, puts: Sequence[Put], lock: Lock) -> None:
    """Write the records in order, a batch per script (the lock renewed between: many must not outlast it)."""
    for start in range(0, len(puts), _BATCH):
        await kernel.write(puts[start : start + _BATCH])
        await lock.reacquire()


async def _forget(client: Redis, *names: str) -> None:
    """Delete the old keys of one kind (one command: all or none)."""
    await client.delete(*names)
