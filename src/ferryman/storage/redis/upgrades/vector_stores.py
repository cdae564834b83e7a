"""Redis layout 12: vector stores' settings become records of the storage kernel.

Layout 11 kept each vector store in a hash (``vector_store:<id>``): its settings as JSON without the id
(``record``), the time it was last active when touched since (``last_active_at``, which overrides the
record's), and what the chunk index keeps (``seq``, ``version``, ``removals_from``, ``files_bytes``); the ids in
the ``vector_stores`` sorted set by number (the creation order), and their owners in the ``owners:vector_store``
hash. Each store is written through the kernel itself (so its layout is the kernel's), in the old order,
created at its own creation time, its body the ``VectorStoreRecord``'s fields, with its owner; then its hash
loses the settings' two fields and keeps the rest, as do its attachments, batches and chunks: the chunk index's
scripts find a store by that hash. The index and the owners go once every store is a record.

Every write is an upsert, which keeps an existing record's number, time and owner, and a store whose hash has
no settings was converted already: a conversion that died midway, run again, writes the rest after them.
"""

from __future__ import annotations

import json

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.storage.domain.kinds import VECTOR_STORE
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.ops import Put
from ferryman.storage.redis.record_moves import move_hashes
from ferryman.storage.redis.store_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_VECTOR_STORES = "vector_stores"
_VECTOR_STORE = "vector_store"
_OWNERS = "owners"
_FIELDS = ("record", "last_active_at")
"""The settings' fields of a store's hash: they go; the chunk index's stay."""
_SETTINGS = (
    "name",
    "created_at",
    "embedding_model",
    "embedding_dimension",
    "metadata",
    "chunking_strategy",
    "expires_after",
    "last_active_at",
    "provider_id",
    "provider_vector_db_id",
)
"""What ``record`` holds (every version wrote them all): the ``VectorStoreRecord``'s fields but its id."""


async def move_vector_stores(client: Redis, keys: Keys, lock: Lock) -> None:
    """Write every vector store of layout 11 as a kernel record with its owner, then delete the old keys.

    Args:
        client: The deployment's client.
        keys: Its keys.
        lock: The upgrade's lock, renewed as batches go.
    """
    index = keys.global_(_VECTOR_STORES)
    await move_hashes(
        client, keys, lock, kind=_VECTOR_STORE, index=index, fields=_FIELDS, to_put=_vector_store, drop=_FIELDS
    )
    await client.delete(index, keys.of(_OWNERS, _VECTOR_STORE))  # one command: all or none


def _vector_store(vector_store_id: str, values: list[str | None], owner: Owner | None) -> Put | None:
    """A store's record, created at its own creation time, as a store's creation writes it."""
    record, last_active_at = values
    if record is None:
        return None  # converted by an earlier run (its settings deleted)
    settings = json.loads(record)
    body = {"vector_store_id": vector_store_id, **{name: settings[name] for name in _SETTINGS}}
    if last_active_at is not None:  # touched since the record was last written: the touch's time stands
        body["last_active_at"] = int(last_active_at)
    return Put(VECTOR_STORE, vector_store_id, body, owner=owner, mode="upsert", at=float(body["created_at"]))
