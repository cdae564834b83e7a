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

from collections.abc import Callable

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.storage.domain.kinds import FILE
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.ops import Put
from ferryman.storage.redis.record_moves import BATCH, move_hashes
from ferryman.storage.redis.store_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_FILES = "files"
_PURPOSE_FILES = "purpose_files"
_FILE = "file"
_OWNERS = "owners"
_FIELDS = ("filename", "purpose", "bytes", "created_at", "mime_type", "expires_at")


async def move_files(client: Redis, keys: Keys, lock: Lock, escaped: Callable[[str], str]) -> None:
    """Write every file of layout 9 as a kernel record with its owner, then delete the old keys.

    Args:
        client: The deployment's client.
        keys: Its keys.
        lock: The upgrade's lock, renewed as batches go.
        escaped: A key prefix as a literal in a ``SCAN MATCH`` pattern.
    """
    index = keys.global_(_FILES)
    await move_hashes(client, keys, lock, kind=_FILE, index=index, fields=_FIELDS, to_put=_file)
    pattern = escaped(keys.base(_PURPOSE_FILES)) + "*"
    purposes = [key async for key in client.scan_iter(match=pattern, count=BATCH)]
    await client.delete(index, keys.of(_OWNERS, _FILE), *purposes)  # one command: all or none


def _file(file_id: str, values: list[str | None], owner: Owner | None) -> Put | None:
    """A file's record, created at its own creation time and leased until it expires, as an upload writes it."""
    filename, purpose, size, created_at, mime_type, expires_at = values
    if filename is None or purpose is None or size is None or created_at is None or mime_type is None:
        return None  # converted by an earlier run (its hash deleted), or never whole
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
    # The expiry sweep deletes it once the lease ends.
    lease = float(expires_at) if expires_at else None
    return Put(FILE, file_id, body, owner=owner, mode="upsert", lease_until=lease, at=float(created_at))
