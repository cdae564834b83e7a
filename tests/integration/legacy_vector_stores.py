"""Vector stores as the versions before the kernel stored them (a table, or Redis hashes), and what they become.

The same stores and owners go into the old SQL table at ``0020_files_on_kernel`` (``test_sql_migrations``) and
the old Redis layout 11 (``test_redis_upgrade``), written as those versions wrote them, not through this
version's code; the first store has what the chunk index keeps (an attachment, a batch, a chunk, a removal),
which must come through untouched. :func:`assert_vector_stores_moved` reads the stores back through the kernel
after the upgrade: in their old order, equal, each with its owner, and a caller's page filtered in the query.
"""

from __future__ import annotations

import json
import struct
from dataclasses import asdict
from typing import Any

from legacy_agents import ALICE, BOB, principal
from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from ferryman.storage.domain.file_batches import file_batch
from ferryman.storage.domain.vector_stores import vector_stores
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import UNOWNED, Owner, attribute_term, principal_term
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.knowledge import FileBatchRecord, VectorStoreRecord
from ferryman.storage.redis.store_keys import Keys

WHEN = 1740830400
"""2025-03-01 12:00 UTC in Unix seconds, as vector stores keep their times."""
STATIC = {"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}}

# In the order they were listed (by creation time, then id), which is not their ids' order.
STORES = [
    VectorStoreRecord(
        "vs_zeta",
        "notes",
        WHEN,
        "all-MiniLM-L6-v2",
        3,
        metadata={"team": "red"},
        chunking_strategy=STATIC,
        expires_after={"anchor": "last_active_at", "days": 7},
        last_active_at=WHEN + 500,
    ),
    VectorStoreRecord(
        "vs_alpha",
        "registered",
        WHEN + 60,
        "all-MiniLM-L6-v2",
        3,
        chunking_strategy=STATIC,
        last_active_at=WHEN + 60,
        provider_id="faiss",
        provider_vector_db_id="db_alpha",
    ),
    VectorStoreRecord("vs_mid", "unowned", WHEN + 60, "nomic", 768, last_active_at=WHEN + 90),
]
STORE_OWNERS = {"vs_zeta": ALICE, "vs_alpha": BOB}
ORPHAN_STORE = "vs_deleted_long_ago"
"""An owner row whose store is gone: the upgrade drops it."""
VERSIONS = {"vs_zeta": (7, 5), "vs_alpha": (3, 3), "vs_mid": (0, 0)}
"""Each store's ``version`` and ``removals_from``, the chunk index's: kept as they are."""

# What the chunk index keeps of vs_zeta.
INDEXED = "vs_zeta"
FILE = "file_zeta"
BATCH = "vsfb_zeta"
CHUNK = "chunk_zeta_0"
REMOVED = "file_removed"
EMBEDDING = (1.0, 0.0, 0.0)
FLOAT32 = struct.pack(f"<{len(EMBEDDING)}f", *EMBEDDING)
"""The embedding as SQLite and Redis keep it."""


def owner_of(vector_store_id: str) -> Owner | None:
    found = STORE_OWNERS.get(vector_store_id)
    return None if found is None else Owner.from_json(found)


# -- SQL at 0020_files_on_kernel ------------------------------------------------------------------------------------


class _SqlText(str):
    """SQL that :func:`_insert` writes as it is, not as a string literal."""

    __slots__ = ()


def _literal(value: object) -> str:
    if isinstance(value, _SqlText):
        return str(value)
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def _insert(table: str, **values: object) -> str:
    """An INSERT of SQL literals, the same text on both dialects."""
    return f"INSERT INTO {table} ({', '.join(values)}) VALUES ({', '.join(map(_literal, values.values()))})"


def _embedding(dialect: str) -> _SqlText:
    """A chunk's embedding as a SQL literal: float32 bytes on SQLite, pgvector's text on PostgreSQL."""
    if dialect == "sqlite":
        return _SqlText("X'" + FLOAT32.hex() + "'")
    return _SqlText("'[" + ",".join(map(str, EMBEDDING)) + "]'")


def sql_rows(dialect: str) -> list[str]:
    """The stores (newest first: the table's order is not theirs), their owner rows and an orphan's, and the chunk
    index's rows of the first, as the versions at ``0020_files_on_kernel`` wrote them."""
    found = []
    for store in reversed(STORES):
        version, removals_from = VERSIONS[store.vector_store_id]
        found.append(
            _insert(
                "vector_stores",
                vector_store_id=store.vector_store_id,
                name=store.name,
                created_at=store.created_at,
                embedding_model=store.embedding_model,
                embedding_dimension=store.embedding_dimension,
                metadata=json.dumps(store.metadata),
                chunking_strategy=json.dumps(store.chunking_strategy),
                expires_after=None if store.expires_after is None else json.dumps(store.expires_after),
                last_active_at=store.last_active_at,
                provider_id=store.provider_id,
                provider_vector_db_id=store.provider_vector_db_id,
                version=version,
                removals_from=removals_from,
            )
        )
    owners = {**STORE_OWNERS, ORPHAN_STORE: STORE_OWNERS["vs_zeta"]}
    found += [
        _insert(
            "record_owners", kind="vector_store", record_id=rid, principal=principal(owner), owner=json.dumps(owner)
        )
        for rid, owner in owners.items()
    ]
    found += [
        _insert("file_batches", batch_id=BATCH, vector_store_id=INDEXED, created_at=WHEN + 10, cancelled=False),
        _insert(
            "vector_store_files",
            vector_store_id=INDEXED,
            file_id=FILE,
            created_at=WHEN + 10,
            status="completed",
            attributes='{"lang": "en"}',
            chunking_strategy=json.dumps(STATIC),
            usage_bytes=42,
            last_error=None,
            batch_id=BATCH,
            lease_until=None,
        ),
        _insert(
            "chunks",
            vector_store_id=INDEXED,
            chunk_id=CHUNK,
            file_id=FILE,
            position=0,
            text="the ferry leaves at noon",
            token_count=5,
            metadata="{}",
            embedding=_embedding(dialect),
            version=6,
        ),
        _insert("chunk_removals", vector_store_id=INDEXED, version=7, file_id=REMOVED, chunk_id=None),
    ]
    return found


# -- Redis layout 11 ------------------------------------------------------------------------------------------------


async def write_layout_11(admin: Redis, keys: Keys) -> list[str]:
    """The stores as layout 11 kept them (hashes, the index by number, owners, one orphan owner; the first one
    touched since its record was written) and the chunk index's keys of the first; those keys, which stay."""
    kept = []
    for store in STORES:
        seq = int(await admin.incr(keys.global_("seq")))
        version, removals_from = VERSIONS[store.vector_store_id]
        settings: dict[str, Any] = asdict(store)
        del settings["vector_store_id"]
        mapping: dict[FieldT, EncodableT] = {"seq": seq, "version": version, "removals_from": removals_from}
        if store.vector_store_id == INDEXED:
            # Touched after its record was written: the hash's time is the store's.
            mapping["last_active_at"] = store.last_active_at
            settings["last_active_at"] = store.created_at
            mapping["files_bytes"] = 42  # kept since layout 11; the others' are summed at their next view
        mapping["record"] = json.dumps(settings)
        await admin.hset(keys.of("vector_store", store.vector_store_id), mapping=mapping)
        await admin.zadd(keys.global_("vector_stores"), {store.vector_store_id: seq})
        kept.append(keys.of("vector_store", store.vector_store_id))
    for rid, owner in {**STORE_OWNERS, ORPHAN_STORE: STORE_OWNERS["vs_zeta"]}.items():
        await admin.hset(keys.of("owners", "vector_store"), rid, json.dumps(owner))
    await admin.set(keys.global_("schema"), 11)
    return kept + await _chunk_index_of_layout_11(admin, keys)


async def _chunk_index_of_layout_11(admin: Redis, keys: Keys) -> list[str]:
    """An attachment in a batch, a chunk and a removal of the first store, as layout 11 kept them; their keys."""
    seq = int(await admin.incr(keys.global_("seq")))
    attachment = {
        "created_at": WHEN + 10,
        "status": "completed",
        "attributes": '{"lang": "en"}',
        "chunking_strategy": json.dumps(STATIC),
        "usage_bytes": 42,
        "batch_id": BATCH,
        "seq": seq,
    }
    chunk = {"file_id": FILE, "position": 0, "text": "the ferry leaves at noon", "token_count": 5, "metadata": {}}
    written: dict[str, tuple[str, Any]] = {
        keys.pair("vs_file", INDEXED, FILE): ("hset", attachment),
        keys.of("vs_files", INDEXED): ("zadd", {FILE: seq}),
        keys.of("vs_completed", INDEXED): ("zadd", {FILE: seq}),
        keys.of("vs_batches", INDEXED): ("sadd", BATCH),
        keys.of("batch", BATCH): ("hset", {"vector_store_id": INDEXED, "created_at": WHEN + 10, "cancelled": 0}),
        keys.of("batch_files", BATCH): ("zadd", {FILE: seq}),
        keys.of("file_stores", FILE): ("sadd", INDEXED),
        keys.of("chunks", INDEXED): ("hset", {CHUNK: json.dumps(chunk)}),
        keys.of("chunk_vectors", INDEXED): ("hset", {CHUNK: FLOAT32}),
        keys.of("chunk_files", INDEXED): ("hset", {CHUNK: FILE}),
        keys.pair("file_chunks", INDEXED, FILE): ("zadd", {CHUNK: 0}),
        keys.of("chunk_versions", INDEXED): ("zadd", {CHUNK: 6}),
        keys.of("chunk_removals", INDEXED): ("zadd", {REMOVED: 7}),
    }
    for key, (command, value) in written.items():
        if command == "hset":
            await admin.hset(key, mapping=value)
        elif command == "zadd":
            await admin.zadd(key, value)
        else:
            await admin.sadd(key, value)
    return [key for key in written if key != keys.of("batch", BATCH)]  # the batch's hash becomes its record (20)


# -- after the upgrade ----------------------------------------------------------------------------------------------


async def assert_vector_stores_moved(kernel: Kernel) -> None:
    """Every store is a kernel record now: in listing order, equal, with its owner; pages filter by owner."""
    records = vector_stores(kernel)
    found = await records.stored_page(parent="")
    assert [item.value for item in found.items] == STORES
    assert [item.rec.owner for item in found.items] == [owner_of(s.vector_store_id) for s in STORES]
    assert [item.rec.at for item in found.items] == [float(s.created_at) for s in STORES]
    assert [(item.rec.status, item.rec.lease_until) for item in found.items] == [(None, None)] * len(STORES)
    alice = Terms(frozenset({principal_term("key:alice")}))
    assert [s.vector_store_id for s in await records.all(allow=alice)] == ["vs_zeta"]
    blue = Terms(frozenset({attribute_term("teams", "blue")}))
    assert [s.vector_store_id for s in await records.all(allow=blue)] == ["vs_alpha"]
    nobody = Terms(frozenset({UNOWNED}))
    assert [s.vector_store_id for s in await records.all(allow=nobody)] == ["vs_mid"]
    assert await records.find(ORPHAN_STORE) is None
    assert await file_batch(kernel, INDEXED, BATCH) == FileBatchRecord(BATCH, INDEXED, WHEN + 10)
