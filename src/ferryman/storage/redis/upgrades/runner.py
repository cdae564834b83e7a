"""Bringing Redis data an older ferryman wrote up to this version's layout, once, whichever replica opens first.

The layout version is the ``schema`` key under the deployment's prefix
(absent: 1). A store that opens on older data takes the ``schema_lock`` (other
replicas wait on it), converts, then writes the version. Each step is
idempotent, so a replica that dies midway leaves data the next one finishes
converting once the lock expires.

Versions: 1 stored stream events as whole SSE frames; 2 stores their JSON data.
3 withholds what a shield blocked, which earlier versions stored raw
(``blocked``: placeholders, as this version stores for a block).
4 types principals: an owner's JSON gets its ``kind`` (``key:NAME`` was an API
key, anything else a token's subject) and a subject's idempotency keys are
renamed to its qualified name ``sub:ID``. 5 moves registered models, toolgroups,
shields and API keys into the storage kernel's records (``registry``). 6 indexes the
conversations, and each one's responses, so that they can be listed (``conversations``).
7 moves agents, with their owners, into the kernel's records (``agents``); sessions stay.
8 keeps each session's history epoch (``history_epoch`` in its hash, absent: 0; ``history_cache.py``): nothing
is converted, but a ferryman of 7 deletes turns without bumping it, so it must not write 8's data.
9 stamps each chunk with the store version that wrote it and keeps what each write removed, the chunk feed that
keeps in-process indexes current (``chunks``): existing chunks get version 0.
10 moves files (their metadata), with their owners, into the kernel's records (``files``); their
vector stores and chunks stay.
11 keeps each vector store's files' bytes (``files_bytes`` in its hash, absent: summed by the store's next view):
nothing is converted, but a ferryman of 10 changes attachments without keeping it, so it must not write 11's data.
12 moves vector stores' settings, with their owners, into the kernel's records (``vector_stores``);
each store's hash keeps what the chunk index reads, and its attachments, batches and chunks stay.
13 moves conversations, with their owners, into the kernel's records (``conversation_kernel``);
each one's hash keeps its session id, and its items and responses stay.
14 moves sessions, with their owners, into the kernel's records (``session_kernel``); each one's
hash stays as its anchor, without its name and start, its turns with it, and the agents' session indexes go.
15 gives each response its record, with its owner, in the kernel (``response_kernel``), which lists
it; its hash stays, and the indexes that listed responses go.
16 keeps a turn's owner in the turn's own hash (``owner``), which takes it when it goes
(``turn_owners``): the owners of turns still there move into their hashes, and ``owners:turn``
goes with any other ``owners:<kind>`` hash left, the last of the side tables of owners.
17 moves items (a conversation's, a response's input, a fork holder's) into the kernel's records, under their
container (``item_kernel``); their sorted sets and hashes go.
18 moves a response's stored events into its record's ``events`` log in the kernel (``response_event_log``);
their sorted sets go.
19 drops conversations' anchors (``conversation:<id>``) and sessions' sets of their conversations
(``session_convs:<id>``): a conversation is its kernel record alone (``conversation_anchors``).
20 moves file batches into the kernel's records, under their vector stores (``file_batches``); the indexes of
their files stay.
Replicas of an older version must be stopped before one of this version opens:
they would go on writing frames.
"""

from __future__ import annotations

from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.lock import Lock

from ferryman.errors import ConfigurationError
from ferryman.storage.codec import frame_data
from ferryman.storage.owners import legacy_owner, typed_owner
from ferryman.storage.redis.idempotency import record_id
from ferryman.storage.redis.store_keys import (
    SCHEMA,
    SCHEMA_LOCK,
    SEQ,
    TURN_EVENTS,
    Keys,
    event_member,
    stored_event,
)
from ferryman.storage.redis.upgrades.agents import move_agents
from ferryman.storage.redis.upgrades.blocked import withhold_blocked_text
from ferryman.storage.redis.upgrades.chunks import stamp_chunks
from ferryman.storage.redis.upgrades.conversation_anchors import drop_conversation_anchors
from ferryman.storage.redis.upgrades.conversation_kernel import move_conversations
from ferryman.storage.redis.upgrades.conversations import index_conversations
from ferryman.storage.redis.upgrades.file_batches import move_file_batches
from ferryman.storage.redis.upgrades.files import move_files
from ferryman.storage.redis.upgrades.item_kernel import move_items
from ferryman.storage.redis.upgrades.registry import move_registries
from ferryman.storage.redis.upgrades.response_event_log import move_response_events
from ferryman.storage.redis.upgrades.response_kernel import move_responses
from ferryman.storage.redis.upgrades.session_kernel import move_sessions
from ferryman.storage.redis.upgrades.turn_owners import move_turn_owners
from ferryman.storage.redis.upgrades.vector_stores import move_vector_stores

SCHEMA_VERSION = 20
LOCK_SECONDS = 30.0
_BLOCKED_TEXT = 3
_TYPED_PRINCIPALS = 4
_KERNEL_RECORDS = 5
_CONVERSATION_INDEX = 6
_KERNEL_AGENTS = 7
_CHUNK_FEED = 9
_KERNEL_FILES = 10
_KERNEL_VECTOR_STORES = 12
_KERNEL_CONVERSATIONS = 13
_KERNEL_SESSIONS = 14
_KERNEL_RESPONSES = 15
_TURN_OWNERS = 16
_KERNEL_ITEMS = 17
_KERNEL_RESPONSE_EVENTS = 18
_CONVERSATION_ANCHORS = 19
_KERNEL_FILE_BATCHES = 20
_OWNERS = "owners"
_RESPONSE_EVENTS = "response_events"
"""A response's events before layout 18 moved them into its record's log."""
_CONVERSATION = "conversation"
"""A conversation's hash before layout 19 deleted it (layout 6 indexes them)."""
_IDEMPOTENCY = "idempotency"
_RENAMED = "schema_renamed"
"""A set of the idempotency keys a conversion to version 4 renamed, so that one finishing it renames none twice."""
_SCAN_BATCH = 500


async def upgrade(client: Redis, keys: Keys) -> None:
    """Convert the data under ``keys``' prefix to :data:`SCHEMA_VERSION` unless it is there already.

    Raises:
        ConfigurationError: the data was written by a newer ferryman.
    """
    if await _version(client, keys) == SCHEMA_VERSION:
        return
    lock: Lock = client.lock(keys.global_(SCHEMA_LOCK), timeout=LOCK_SECONDS)
    async with lock:
        found = await _version(client, keys)
        if found == SCHEMA_VERSION:
            return  # another replica converted while this one waited
        fresh = not await client.exists(keys.global_(SEQ))  # every record ever stored drew a number
        for kind in () if fresh else (TURN_EVENTS, _RESPONSE_EVENTS):
            async for key in client.scan_iter(match=_escaped(keys.base(kind)) + "*", count=_SCAN_BATCH):
                await _events_as_data(client, key)
                await lock.reacquire()
        if found < _BLOCKED_TEXT and not fresh:  # after the events: it reads them as data
            await withhold_blocked_text(client, keys, lock, _escaped)
        if found < _TYPED_PRINCIPALS:  # idempotency keys are stored before any record: fresh or not
            await _typed_principals(client, keys, lock)
        if found < _KERNEL_RECORDS:  # after the owners are typed; API keys draw no number: fresh or not
            await move_registries(client, keys, lock)
        if found < _CONVERSATION_INDEX and not fresh:
            await index_conversations(client, keys, lock, _escaped(keys.base(_CONVERSATION)))
        if found < _KERNEL_AGENTS and not fresh:  # after the owners are typed
            await move_agents(client, keys, lock)
        if found < _CHUNK_FEED and not fresh:
            await stamp_chunks(client, keys, lock)
        if found < _KERNEL_FILES and not fresh:  # after the owners are typed
            await move_files(client, keys, lock, _escaped)
        if found < _KERNEL_VECTOR_STORES and not fresh:  # after the owners are typed and the chunks stamped
            await move_vector_stores(client, keys, lock)
        if found < _KERNEL_CONVERSATIONS and not fresh:  # after the owners are typed and the conversations indexed
            await move_conversations(client, keys, lock)
        if found < _KERNEL_SESSIONS and not fresh:  # after the owners are typed
            await move_sessions(client, keys, lock, _escaped)
        if found < _KERNEL_RESPONSES and not fresh:  # after the owners are typed and the conversations indexed
            await move_responses(client, keys, lock, _escaped)
        if found < _TURN_OWNERS and not fresh:  # after the owners are typed
            await move_turn_owners(client, keys, lock, _escaped)
        if found < _KERNEL_ITEMS and not fresh:  # after their containers are records
            await move_items(client, keys, lock, _escaped)
        if found < _KERNEL_RESPONSE_EVENTS and not fresh:  # after the events are data and the responses records
            await move_response_events(client, keys, lock, _escaped)
        if found < _CONVERSATION_ANCHORS and not fresh:
            await drop_conversation_anchors(client, keys, lock, _escaped)
        if found < _KERNEL_FILE_BATCHES and not fresh:  # after the vector stores are records
            await move_file_batches(client, keys, lock, _escaped)
        async with client.pipeline(transaction=True) as pipe:
            # The renamed keys' record goes with the version that makes it useless, never before.
            pipe.set(keys.global_(SCHEMA), SCHEMA_VERSION)
            pipe.delete(keys.global_(_RENAMED))
            await pipe.execute()


async def _version(client: Redis, keys: Keys) -> int:
    stored = await client.get(keys.global_(SCHEMA))
    version = 1 if stored is None else int(stored)
    if version > SCHEMA_VERSION:
        raise ConfigurationError(
            f"the Redis data under '{keys.prefix}' has layout version {version}; "
            f"this ferryman knows up to {SCHEMA_VERSION}: upgrade it"
        )
    return version


async def _events_as_data(client: Redis, key: str) -> None:
    """Replace the SSE frames of one events sorted set by their data, in one transaction (retried if it changed)."""

    async def convert(pipe: Pipeline) -> None:
        members = cast(list[tuple[str, float]], await pipe.zrange(key, 0, -1, withscores=True))
        stale: dict[str, Any] = {}
        fresh: dict[str, float] = {}
        for member, score in members:
            event = stored_event(member)
            data = frame_data(event.data)
            if data != event.data:
                stale[member] = score
                fresh[event_member(event.seq, data)] = score
        pipe.multi()  # type: ignore[no-untyped-call]
        if stale:
            pipe.zrem(key, *stale)
            pipe.zadd(key, fresh)

    await client.transaction(convert, key)


async def _typed_principals(client: Redis, keys: Keys, lock: Lock) -> None:
    """Version 4: every owner gets its kind, every subject's idempotency key its ``sub:`` owner."""
    async for key in client.scan_iter(match=_escaped(keys.base(_OWNERS)) + "*", count=_SCAN_BATCH):
        typed: dict[str, str] = {}
        scanned = 0
        async for field, value in client.hscan_iter(key, count=_SCAN_BATCH):
            if (owner := typed_owner(value)) != value:
                typed[field] = owner
            scanned += 1
            if scanned % _SCAN_BATCH == 0:  # a hash of many owners must not outlast the lock
                if typed:
                    await client.hset(key, mapping=typed)  # type: ignore[arg-type]  # str keys and values
                typed.clear()
                await lock.reacquire()
        if typed:
            await client.hset(key, mapping=typed)  # type: ignore[arg-type]
        await lock.reacquire()
    base = keys.base(_IDEMPOTENCY)
    renamed = keys.global_(_RENAMED)
    untyped: list[tuple[str, str, str]] = []
    batch: list[str] = []
    async for key in client.scan_iter(match=_escaped(base) + "*", count=_SCAN_BATCH):
        batch.append(key)
        if len(batch) == _SCAN_BATCH:  # many keys must not outlast the lock
            untyped.extend(await _not_renamed(client, base, batch, renamed))
            batch.clear()
            await lock.reacquire()
    untyped.extend(await _not_renamed(client, base, batch, renamed))
    # Longest owners first: "bob" becomes "sub:bob" only once the subject "sub:bob" has left that name.
    for key, owner, idempotency_key in sorted(untyped, key=lambda found: -len(found[1])):
        qualified = legacy_owner(owner).key
        if qualified != owner:
            await _rename(client, key, keys.of(_IDEMPOTENCY, record_id(qualified, idempotency_key)), renamed)
            await lock.reacquire()


async def _not_renamed(client: Redis, base: str, keys: list[str], renamed: str) -> list[tuple[str, str, str]]:
    """Of these idempotency keys, those of an owner that no earlier run renamed: ``(key, owner, idempotency key)``."""
    if not keys:
        return []
    async with client.pipeline(transaction=False) as pipe:  # SISMEMBERs in one round trip (no SMISMEMBER: 6.2+)
        for key in keys:
            pipe.sismember(renamed, key)
        done = await pipe.execute()
    found = []
    for key, was_renamed in zip(keys, done, strict=True):
        length, _, rest = key.removeprefix(base).partition(":")
        owner, idempotency_key = rest[: int(length)], rest[int(length) + 1 :]
        if owner and not was_renamed:
            found.append((key, owner, idempotency_key))
    return found


async def _rename(client: Redis, key: str, new_key: str, renamed: str) -> None:
    """Rename ``key`` (unless it expired meanwhile) and record the new name as renamed, in one transaction."""

    async def rename(pipe: Pipeline) -> None:
        exists = await pipe.exists(key)
        pipe.multi()  # type: ignore[no-untyped-call]
        if exists:
            pipe.rename(key, new_key)
        pipe.sadd(renamed, new_key)

    await client.transaction(rename, key)


def _escaped(prefix: str) -> str:
    """``prefix`` as a literal in a ``SCAN MATCH`` pattern."""
    return "".join(f"\\{char}" if char in "*?[]\\" else char for char in prefix)
