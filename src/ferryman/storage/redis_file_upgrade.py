"""Redis layout 10: files (uploaded files' metadata) become records of the storage kernel.

Layout 9 kept each file in a hash (``file:<id>``: filename, purpose, size, creation time in Unix seconds, MIME
type, expiry when it has one, and its number), the ids in the ``files`` sorted set by that number (the creation
order) and in one ``purpose_files:<purpose>`` sorted set per purpose, and their owners in the ``owners:file``
hash. Each file is written through the kernel itself (so its layout is the kernel's), in the old order, created
at its own creation time, its body the ``FileRecord``'s fields, with its owner; then its hash goes. The indexes
and the owners go once every file is a record. What else names a file (its vector stores, its chunks) stays.

Every write is an upsert, which keeps an existing record's number, time and owner, and a file whose hash is
gone was converted already: a conversion that died midway, run again, writes the rest after them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from .domain.kinds import FILE, SCHEMA
from .kernel.model import Owner
from .kernel.ops import Put
from .redis.kernel import RedisKernel
from .redis_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_FILES = "files"
_PURPOSE_FILES = "purpose_files"
_FILE = "file"
_OWNERS = "owners"
_FIELDS = ("filename", "purpose", "bytes", "created_at", "mime_type", "expires_at")
_BATCH = 100


async def move_files(client: Redis, keys: Keys, lock: Lock, escaped: Callable[[str], str]) -> None:
    """Write every file of layout 9 as a kernel record with its owner, then delete the old keys.

    Args:
        client: The deployment's client.
        keys: Its keys.
        lock: The upgrade's lock, renewed as batches go.
        escaped: A key prefix as a literal in a ``SCAN MATCH`` pattern.
    """
    kernel = RedisKernel(client, SCHEMA, prefix=f"{keys.prefix}k:")  # where a store's kernel keeps its keys
    await kernel.open()
    try:
        index, owners = keys.global_(_FILES), keys.of(_OWNERS, _FILE)
        start = 0
        while ids := cast(list[str], await client.zrange(index, start, start + _BATCH - 1)):
            await _move(client, kernel, keys, ids, owners)
            await lock.reacquire()  # many files must not outlast the lock
            start += len(ids)
        pattern = escaped(keys.base(_PURPOSE_FILES)) + "*"
        purposes = [key async for key in client.scan_iter(match=pattern, count=_BATCH)]
        await client.delete(index, owners, *purposes)  # one command: all or none
    finally:
        await kernel.close()


async def _move(client: Redis, kernel: RedisKernel, keys: Keys, ids: list[str], owners: str) -> None:
    """Write one batch of files (those whose hash is still there) as records, then delete their hashes."""
    async with client.pipeline(transaction=False) as pipe:
        for file_id in ids:
            pipe.hmget(keys.of(_FILE, file_id), list(_FIELDS))
        pipe.hmget(owners, ids)
        *found, stored_owners = cast(list[list[str | None]], await pipe.execute())
    puts: list[Put] = []
    for file_id, values, owner in zip(ids, found, stored_owners, strict=True):
        filename, purpose, size, created_at, mime_type, expires_at = values
        if filename is None or purpose is None or size is None or created_at is None or mime_type is None:
            continue  # converted by an earlier run (its hash deleted), or never whole
        body = {
            "file_id": file_id,
            "filename": filename,
            "purpose": purpose,
            "bytes": int(size),
            "created_at": int(created_at),
            "mime_type": mime_type,
            # Absent when the file never expires (the old script wrote no field for it).
            "expires_at": int(expires_at) if expires_at else None,
        }
        # Leased until it expires, as an upload writes it: the expiry sweep deletes it once the lease ends.
        lease = float(expires_at) if expires_at else None
        puts.append(
            Put(FILE, file_id, body, owner=_owner(owner), mode="upsert", lease_until=lease, at=float(created_at))
        )
    if puts:
        await kernel.write(puts)
        await client.delete(*(keys.of(_FILE, put.id) for put in puts))


def _owner(stored: str | None) -> Owner | None:
    """An owner of layout 9 (typed: ``{"kind", "id", "attributes"}``) as the kernel stores it."""
    found: Any = None if stored is None else json.loads(stored)
    return None if found is None else Owner.from_json(found)
