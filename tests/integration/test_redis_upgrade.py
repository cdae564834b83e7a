"""Redis data an older ferryman wrote (stream events as whole SSE frames, registries beside the kernel) is
converted once, at open."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from legacy_agents import AGENT_OWNERS, AGENTS, ALICE, ORPHAN_AGENT, assert_agents_moved
from legacy_conversations import CONVERSATIONS, ITEMS, TALKED, assert_conversations_moved, write_layout_12
from legacy_conversations import owner_of as conversation_owner
from legacy_files import FILE_OWNERS, FILES, ORPHAN_FILE, assert_files_moved
from legacy_redis_responses import HEADS as RESPONSE_HEADS
from legacy_redis_responses import (
    ORPHAN_RESPONSE,
    OTHER,
    RUNNING,
    TALK,
    assert_responses_moved,
    store_responses,
    write_layout_14,
)
from legacy_redis_responses import owner_of as response_owner
from legacy_redis_sessions import HELD_AGENT, SESSIONS, assert_sessions_moved, write_layout_13
from legacy_redis_sessions import owner_of as session_owner
from legacy_redis_turn_owners import ORPHANS, assert_owners_moved, store_turns, write_layout_15
from legacy_registries import API_KEYS, ORPHAN, OWNERS, REGISTERED, assert_moved
from legacy_vector_stores import STORES, assert_vector_stores_moved, owner_of, write_layout_11
from redis.asyncio import Redis
from replicas import redis_database
from store_records import complete, finished, response_start, start, text_item, texts, turn_of, user

from ferryman.api.responses import Item
from ferryman.errors import ConfigurationError, NotFoundError
from ferryman.ids import utcnow
from ferryman.redis_url import split_prefix
from ferryman.storage.base import ConversationRecord, ResponseRecord, SessionRecord, StoredEvent, TurnRecord
from ferryman.storage.domain.agents import agents, sessions
from ferryman.storage.domain.conversations import conversations
from ferryman.storage.domain.file_batches import file_batch
from ferryman.storage.domain.files import files
from ferryman.storage.domain.forks import Lineage, Lineages
from ferryman.storage.domain.items import item_puts
from ferryman.storage.domain.kinds import AGENT, CONVERSATION, FILE, FILE_BATCH, MODEL, VECTOR_STORE
from ferryman.storage.domain.kinds import RESPONSE as RESPONSE_KIND
from ferryman.storage.domain.kinds import SCHEMA as KINDS
from ferryman.storage.domain.kinds import SESSION as SESSION_KIND
from ferryman.storage.domain.responses import events_written, response_heads
from ferryman.storage.domain.vector_stores import vector_stores
from ferryman.storage.kernel.model import Kind, Owner
from ferryman.storage.kernel.ops import Op, Page, Put
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.knowledge import FileBatchRecord, VectorStoreFileRecord
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.storage.redis.store import RedisStore
from ferryman.storage.redis.store_keys import SCHEMA, SCHEMA_LOCK, TURN_EVENTS, Keys
from ferryman.storage.redis.upgrades.runner import SCHEMA_VERSION
from ferryman.storage.rows import ITEM

pytestmark = pytest.mark.anyio

RESPONSE_EVENTS = "response_events"
"""Where a response's events were before layout 18 moved them into its record's log."""


@pytest.fixture()
def deployment() -> Iterator[tuple[str, str]]:
    """The test Redis URL and a fresh key prefix, its keys deleted afterwards."""
    with redis_database() as prefixed:
        yield split_prefix(prefixed)


@pytest.fixture()
async def admin(deployment: tuple[str, str]) -> AsyncIterator[Redis]:
    client = Redis.from_url(deployment[0], decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


def data(seq: int) -> str:
    return json.dumps({"event": {"payload": {"event_type": "step_progress", "n": seq}}})


async def _records(url: str, prefix: str) -> tuple[str, str]:
    """A turn and a response stored by this version; their ids."""
    store = RedisStore(url, prefix)
    await store.open()
    try:
        start = response_start("q")
        await store.start_response(start)
        return start.turn.turn_id, start.record.response.id
    finally:
        await store.close()


async def _as_old_version(admin: Redis, keys: Keys, turn_id: str, response_id: str) -> None:
    """Rewrite the events as version 1 did: SSE frames, and no layout version (one event already converted)."""
    await admin.delete(keys.global_(SCHEMA))
    turn_frames = {f"{seq}:id: {seq}\ndata: {data(seq)}\n\n": seq for seq in range(3)}
    await admin.zadd(keys.of(TURN_EVENTS, turn_id), {**turn_frames, f"3:{data(3)}": 3})
    response_frames = {f"{seq}:id: {seq}\nevent: response.created\ndata: {data(seq)}\n\n": seq for seq in range(2)}
    await admin.zadd(keys.of(RESPONSE_EVENTS, response_id), response_frames)


async def test_events_stored_as_sse_frames_read_back_as_data(deployment: tuple[str, str], admin: Redis) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    turn_id, response_id = await _records(url, prefix)
    await _as_old_version(admin, keys, turn_id, response_id)

    store = RedisStore(url, prefix)
    await store.open()
    try:
        assert await store.turn_events_after(turn_id, -1) == [StoredEvent(seq, data(seq)) for seq in range(4)]
        assert await store.turn_events_after(turn_id, 1) == [StoredEvent(2, data(2)), StoredEvent(3, data(3))]
        assert await store.turn_event_count(turn_id) == 4
        assert await store.events_after(response_id, -1) == [StoredEvent(0, data(0)), StoredEvent(1, data(1))]
        await store.save_turn_events(turn_id, 4, [data(4)])
        assert (await store.turn_events_after(turn_id, 3)) == [StoredEvent(4, data(4))]
    finally:
        await store.close()
    assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)


async def test_replicas_opening_together_convert_once(deployment: tuple[str, str], admin: Redis) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    turn_id, response_id = await _records(url, prefix)
    await _as_old_version(admin, keys, turn_id, response_id)
    stores = [RedisStore(url, prefix) for _ in range(4)]
    await asyncio.gather(*(store.open() for store in stores))
    try:
        for store in stores:
            assert [event.data for event in await store.turn_events_after(turn_id, -1)] == [
                data(seq) for seq in range(4)
            ]
    finally:
        await asyncio.gather(*(store.close() for store in stores))


async def test_a_replica_waits_for_the_one_converting(deployment: tuple[str, str], admin: Redis) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    turn_id, response_id = await _records(url, prefix)
    await _as_old_version(admin, keys, turn_id, response_id)
    store = RedisStore(url, prefix)
    async with admin.lock(keys.global_(SCHEMA_LOCK), timeout=30):
        opening = asyncio.create_task(store.open())
        done, _ = await asyncio.wait({opening}, timeout=0.5)
        assert not done, "the store opened while another replica held the conversion lock"
        # The holder finishes (as far as the waiting replica can tell) and marks the layout current.
        await admin.set(keys.global_(SCHEMA), SCHEMA_VERSION)
    await opening
    try:
        # It did not convert again: what the holder left is what it reads.
        [first, *_] = await store.turn_events_after(turn_id, -1)
        assert first.data.startswith("id: 0\n")
    finally:
        await store.close()


async def test_data_of_a_newer_version_is_refused(deployment: tuple[str, str], admin: Redis) -> None:
    url, prefix = deployment
    await admin.set(Keys(prefix).global_(SCHEMA), SCHEMA_VERSION + 1)
    with pytest.raises(ConfigurationError, match="layout version"):
        await RedisStore(url, prefix).open()


async def _open_and_check_moved(
    url: str, prefix: str, kind: Kind, check: Callable[[Kernel], Awaitable[None]]
) -> dict[str, int]:
    """Open a store (converting) and check its kernel; the record numbers of the moved ``kind``."""
    store = RedisStore(url, prefix)
    await store.open()
    try:
        await check(store.kernel)
        [page] = await store.kernel.read([Page(kind)])
        return {rec.id: rec.seq for rec in page.items}
    finally:
        await store.close()


# -- layout 5: the registries and API keys move into the kernel -----------------------------------------------------

REGISTRY_KEYS = {
    "model": ("models", "model_order"),
    "toolgroup": ("toolgroups", "toolgroup_order"),
    "shield": ("shields", "shield_order"),
}


async def _registries_of_layout_4(admin: Redis, keys: Keys) -> list[str]:
    """Models, toolgroups, shields (some owned) and API keys (one revoked) as layout 4 stored them; their keys."""
    await admin.set(keys.global_(SCHEMA), 4)
    written = []
    for kind, (bodies, order) in REGISTRY_KEYS.items():
        for value in REGISTERED[kind]:
            seq = await admin.incr(keys.global_("seq"))
            await admin.hset(keys.global_(bodies), value.identifier, value.model_dump_json())
            await admin.zadd(keys.global_(order), {value.identifier: seq})
        written += [keys.global_(bodies), keys.global_(order), keys.of("owners", kind)]
    for (kind, record_id), owner in {**OWNERS, ORPHAN: OWNERS[("model", "zeta")]}.items():
        await admin.hset(keys.of("owners", kind), record_id, json.dumps(owner))
    for name, key_hash, attributes, created, revoked in API_KEYS:
        times = {"created_at": created.isoformat(), "revoked_at": revoked and revoked.isoformat()}
        await admin.hset(
            keys.global_("api_keys"), name, json.dumps({"key_hash": key_hash, "attributes": attributes} | times)
        )
        await admin.hset(keys.global_("api_key_hashes"), key_hash, name)
    return [*written, keys.global_("api_keys"), keys.global_("api_key_hashes")]


async def _open_and_check(url: str, prefix: str) -> dict[tuple[str, str], int]:
    """Open a store (converting), check every record; the records' numbers by kind and id."""
    store = RedisStore(url, prefix)
    await store.open()
    try:
        await assert_moved(store.kernel, with_times=False)
        pages = await store.kernel.read([Page(kind) for kind in KINDS.kinds.values()])
        return {(rec.kind, rec.id): rec.seq for page in pages for rec in page.items}
    finally:
        await store.close()


async def test_registries_and_api_keys_of_layout_4_move_into_the_kernel(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    old = await _registries_of_layout_4(admin, keys)
    await _open_and_check(url, prefix)
    assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)
    assert await admin.exists(*old) == 0


async def test_a_conversion_that_died_midway_finishes_without_duplicates(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    await _registries_of_layout_4(admin, keys)
    # It had written the first model (at its own time) and died before the rest.
    kernel = RedisKernel(admin, KINDS, prefix=f"{prefix}k:")
    await kernel.open()
    zeta = REGISTERED["model"][0]
    earlier = 1234.5
    body = zeta.model_dump(mode="json", exclude_none=True)
    await kernel.write(
        [Put(MODEL, zeta.identifier, body, owner=Owner.from_json(OWNERS[("model", "zeta")]), at=earlier)]
    )
    await kernel.close()
    first = await _open_and_check(url, prefix)
    # It died after writing everything, before deleting the old keys: the next run writes nothing twice.
    await _registries_of_layout_4(admin, keys)
    assert await _open_and_check(url, prefix) == first
    kernel = RedisKernel(admin, KINDS, prefix=f"{prefix}k:")
    await kernel.open()
    try:
        [page] = await kernel.read([Page(MODEL)])
        assert page.items[0].at == earlier
    finally:
        await kernel.close()


# -- layout 6: conversations and each one's responses get the indexes that list them ------------------------------


async def _conversations_of_layout_5(prefix: str, admin: Redis) -> None:
    """Three conversations (two created in one second) and three responses, two in the first, as layout 5 kept
    them: hashes alone, a response's conversation a field of its hash (the fields the conversions read)."""
    keys = Keys(prefix)
    for created_at, name in ((20, "conv_b"), (10, "conv_z"), (20, "conv_a")):
        mapping = {"session_id": f"sess_{name}", "metadata": "{}", "created_at": created_at}
        await admin.hset(keys.of("conversation", name), mapping=mapping)  # type: ignore[arg-type]
    for response_id, conversation_id in (("resp_1", "conv_b"), ("resp_alone", ""), ("resp_2", "conv_b")):
        seq = await admin.incr(keys.global_("seq"))
        body = json.dumps({"id": response_id, "created_at": 30 - seq})
        mapping = {"conversation_id": conversation_id, "body": body, "seq": seq}
        await admin.hset(keys.of("response", response_id), mapping=mapping)  # type: ignore[arg-type]
        await admin.zadd(keys.global_("responses"), {response_id: seq})
    await admin.set(keys.global_(SCHEMA), 5)


async def _conversation_order(url: str, prefix: str) -> tuple[list[str], list[str]]:
    """Open a store (converting); its conversations' ids in their order (kernel records since layout 13), and
    conv_b's responses' (their records, since layout 15)."""
    store = RedisStore(url, prefix)
    await store.open()
    try:
        listed = await response_heads(store.kernel).page(where=("conversation_id", "conv_b"))
        return [c.conversation_id for c in await conversations(store.kernel).all()], [
            head.response_id for head in listed.items
        ]
    finally:
        await store.close()


async def test_conversations_of_layout_5_are_listed_in_creation_order(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    await _conversations_of_layout_5(prefix, admin)
    assert await _conversation_order(url, prefix) == (["conv_z", "conv_a", "conv_b"], ["resp_1", "resp_2"])
    assert await admin.exists(keys.of("conv_responses", "conv_b")) == 0  # the records list them now
    assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)


async def test_a_conversation_index_conversion_that_died_midway_keeps_its_order(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    await _conversations_of_layout_5(prefix, admin)
    # It had indexed the oldest conversation, then died.
    await admin.zadd(keys.global_("conversations"), {"conv_z": int(await admin.incr(keys.global_("seq")))})
    assert (await _conversation_order(url, prefix))[0] == ["conv_z", "conv_a", "conv_b"]


# -- layout 7: agents move into the kernel (their sessions stay) ---------------------------------------------------


async def _agents_of_layout_6(url: str, prefix: str, admin: Redis) -> list[str]:
    """The agents as layout 6 stored them (hashes, the index by number, owners, one orphan owner) and a session
    of the first, stored by this version (sessions did not change); the agents' keys."""
    keys = Keys(prefix)
    if not await admin.exists(keys.of("session", "sess_zeta")):
        store = RedisStore(url, prefix)
        await store.open()
        try:
            await store.create_session(SessionRecord("sess_zeta", "agent_zeta", "s", utcnow()))
        finally:
            await store.close()
    written = [keys.global_("agents"), keys.of("owners", "agent")]
    for agent in AGENTS:
        seq = await admin.incr(keys.global_("seq"))
        created_at = agent.created_at.isoformat()  # as ``codec.dump_time`` wrote it
        mapping = {"config": agent.agent_config.model_dump_json(), "created_at": created_at, "seq": seq}
        await admin.hset(keys.of("agent", agent.agent_id), mapping=mapping)  # type: ignore[arg-type]
        await admin.zadd(keys.global_("agents"), {agent.agent_id: seq})
        written.append(keys.of("agent", agent.agent_id))
    for agent_id, owner in {**AGENT_OWNERS, ORPHAN_AGENT: AGENT_OWNERS["agent_zeta"]}.items():
        await admin.hset(keys.of("owners", "agent"), agent_id, json.dumps(owner))
    await admin.set(keys.global_(SCHEMA), 6)
    return written


async def _open_and_check_agents(url: str, prefix: str) -> dict[str, int]:
    """Open a store (converting), check every agent and the session; the agents' record numbers."""
    store = RedisStore(url, prefix)
    await store.open()
    try:
        await assert_agents_moved(store.kernel)
        listed = await sessions(store.kernel).page(parent=None, where=("agent_id", "agent_zeta"))
        assert [s.session_id for s in listed.items] == ["sess_zeta"]
        [page] = await store.kernel.read([Page(AGENT)])
        return {rec.id: rec.seq for rec in page.items}
    finally:
        await store.close()


async def test_agents_of_layout_6_move_into_the_kernel_with_their_owners(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    old = await _agents_of_layout_6(url, prefix, admin)
    await _open_and_check_agents(url, prefix)
    assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)
    assert await admin.exists(*old) == 0
    assert await admin.exists(keys.of("session", "sess_zeta")) == 1


async def test_an_agent_conversion_that_died_midway_finishes_without_duplicates(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    await _agents_of_layout_6(url, prefix, admin)
    # It had written the first agent (and deleted its hash), then died before the rest.
    kernel = RedisKernel(admin, KINDS, prefix=f"{prefix}k:")
    await kernel.open()
    zeta = AGENTS[0]
    try:
        owner = Owner.from_json(AGENT_OWNERS["agent_zeta"])
        await kernel.write([agents(kernel).put(zeta, owner=owner, at=zeta.created_at.timestamp())])
    finally:
        await kernel.close()
    await admin.delete(keys.of("agent", zeta.agent_id))
    first = await _open_and_check_agents(url, prefix)
    # It died after writing everything, before deleting the old keys: the next run writes nothing twice.
    await _agents_of_layout_6(url, prefix, admin)
    assert await _open_and_check_agents(url, prefix) == first


# -- layout 10: files move into the kernel (their vector stores stay) ---------------------------------------------


async def _files_of_layout_9(prefix: str, admin: Redis) -> list[str]:
    """The files as layout 9 stored them (hashes, the indexes by number, owners, one orphan owner) and the set of
    vector stores of the first (which stays); the files' keys."""
    keys = Keys(prefix)
    written = [keys.global_("files"), keys.of("owners", "file")]
    for file in FILES:
        seq = await admin.incr(keys.global_("seq"))
        fields = ("filename", "purpose", "bytes", "created_at", "mime_type")
        mapping = {**{name: getattr(file, name) for name in fields}, "seq": seq}
        if file.expires_at is not None:  # the old script wrote no field for a file that never expires
            mapping["expires_at"] = file.expires_at
        await admin.hset(keys.of("file", file.file_id), mapping=mapping)  # type: ignore[arg-type]
        await admin.zadd(keys.global_("files"), {file.file_id: seq})
        await admin.zadd(keys.of("purpose_files", file.purpose), {file.file_id: seq})
        written += [keys.of("file", file.file_id), keys.of("purpose_files", file.purpose)]
    for file_id, owner in {**FILE_OWNERS, ORPHAN_FILE: FILE_OWNERS["file_zeta"]}.items():
        await admin.hset(keys.of("owners", "file"), file_id, json.dumps(owner))
    await admin.sadd(keys.of("file_stores", "file_zeta"), "vs_1")
    await admin.set(keys.global_(SCHEMA), 9)
    return written


async def test_files_of_layout_9_move_into_the_kernel_with_their_owners(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    old = await _files_of_layout_9(prefix, admin)
    await _open_and_check_moved(url, prefix, FILE, assert_files_moved)
    assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)
    assert await admin.exists(*old) == 0
    assert await admin.smembers(keys.of("file_stores", "file_zeta")) == {"vs_1"}


async def test_a_file_conversion_that_died_midway_finishes_without_duplicates(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    await _files_of_layout_9(prefix, admin)
    # It had written the first file (and deleted its hash), then died before the rest.
    kernel = RedisKernel(admin, KINDS, prefix=f"{prefix}k:")
    await kernel.open()
    zeta = FILES[0]
    try:
        owner = Owner.from_json(FILE_OWNERS["file_zeta"])
        await kernel.write([files(kernel).put(zeta, owner=owner, at=float(zeta.created_at))])
    finally:
        await kernel.close()
    await admin.delete(keys.of("file", zeta.file_id))
    first = await _open_and_check_moved(url, prefix, FILE, assert_files_moved)
    # It died after writing everything, before deleting the old keys: the next run writes nothing twice.
    await _files_of_layout_9(prefix, admin)
    assert await _open_and_check_moved(url, prefix, FILE, assert_files_moved) == first


# -- layout 12: vector stores' settings move into the kernel (what the chunk index keeps stays) ------------------

SETTINGS_FIELDS = ("record", "last_active_at")


async def test_vector_stores_of_layout_11_move_into_the_kernel_and_keep_their_chunk_index(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    kept = await write_layout_11(admin, keys)
    hashes = [keys.of("vector_store", store.vector_store_id) for store in STORES]
    before = [await admin.hgetall(key) for key in hashes]
    await _open_and_check_moved(url, prefix, VECTOR_STORE, assert_vector_stores_moved)
    assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)
    # Each hash keeps the chunk index's fields (seq, version, removals_from, files_bytes), nothing else goes.
    assert [await admin.hgetall(key) for key in hashes] == [
        {field: value for field, value in fields.items() if field not in SETTINGS_FIELDS} for fields in before
    ]
    assert await admin.exists(*kept) == len(kept)
    assert await admin.exists(keys.global_("vector_stores"), keys.of("owners", "vector_store")) == 0


async def _finishes_after_dying(
    url: str,
    prefix: str,
    admin: Redis,
    moved: tuple[Kind, Callable[[Kernel], Awaitable[None]]],
    write_old: Callable[[Redis, Keys], Awaitable[object]],
    first: Callable[[Kernel], Put],
    fields: tuple[str, ...],
) -> None:
    """A conversion of hashes whose moved ``fields`` go, which died midway (its ``first`` record written, its
    fields dropped) or at the end (before deleting the index and owners), finishes without duplicates."""
    keys = Keys(prefix)
    await write_old(admin, keys)
    kernel = RedisKernel(admin, KINDS, prefix=f"{prefix}k:")
    await kernel.open()
    try:
        put = first(kernel)
        await kernel.write([put])
    finally:
        await kernel.close()
    await admin.hdel(keys.of(put.kind.name, put.id), *fields)
    done = await _open_and_check_moved(url, prefix, *moved)
    await write_old(admin, keys)
    assert await _open_and_check_moved(url, prefix, *moved) == done


async def test_a_vector_store_conversion_that_died_midway_finishes_without_duplicates(
    deployment: tuple[str, str], admin: Redis
) -> None:
    zeta = STORES[0]

    def first(kernel: Kernel) -> Put:
        return vector_stores(kernel).put(zeta, owner=owner_of(zeta.vector_store_id))

    moved = (VECTOR_STORE, assert_vector_stores_moved)
    await _finishes_after_dying(*deployment, admin, moved, write_layout_11, first, SETTINGS_FIELDS)


# -- layout 13: conversations move into the kernel (their items and responses stay; layout 17 moves the items) ------

MOVED_FIELDS = ("metadata", "created_at")


async def test_conversations_of_layout_12_move_into_the_kernel_and_keep_their_items(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    anchors = await write_layout_12(admin, keys)
    await _open_and_check_moved(url, prefix, CONVERSATION, assert_conversations_moved)
    assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)
    # Layout 13 kept each hash with its session id, which layout 19 deleted with the sessions' sets: a
    # conversation is its record alone.
    assert await admin.exists(*anchors, *(keys.of("conversation", c.conversation_id) for c in CONVERSATIONS)) == 0
    store = RedisStore(url, prefix)
    await store.open()
    try:  # layout 17 moved the items under their conversation's record
        assert await store.all_items(TALKED) == [ITEM.validate_python(item) for item in ITEMS.values()]
    finally:
        await store.close()
    gone = [keys.global_("conversations"), keys.of("owners", "conversation"), keys.of("conv_responses", TALKED)]
    gone += [keys.of("items", TALKED), keys.of("item_bodies", TALKED)]
    assert await admin.exists(*gone) == 0


async def test_a_conversation_conversion_that_died_midway_finishes_without_duplicates(
    deployment: tuple[str, str], admin: Redis
) -> None:
    zeta = CONVERSATIONS[0]

    def first(kernel: Kernel) -> Put:
        return conversations(kernel).put(zeta, owner=conversation_owner(zeta.conversation_id))

    moved = (CONVERSATION, assert_conversations_moved)
    await _finishes_after_dying(*deployment, admin, moved, write_layout_12, first, MOVED_FIELDS)


# -- layout 14: sessions move into the kernel (their anchors and turns stay) ---------------------------------------

SESSION_MOVED = ("name", "started_at")


async def _sessions_of_layout_13(url: str, prefix: str, admin: Redis) -> list[TurnRecord]:
    """The sessions as layout 13 stored them, and turns that this version's store runs on the old hashes (the
    turns' layout did not change): one completed in sess_zeta, one left running in sess_alpha, of no agent."""
    store = RedisStore(url, prefix)
    await store.open()  # a fresh database: no conversion
    try:
        await write_layout_13(admin, Keys(prefix))
        done = await start(store, SESSIONS[0], "q")
        await complete(store, done, "a")
        return [done, await start(store, SESSIONS[1], "still running")]
    finally:
        await store.close()


async def test_sessions_of_layout_13_move_into_the_kernel_and_keep_their_turns(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    done, running = await _sessions_of_layout_13(url, prefix, admin)
    await admin.set(keys.global_(SCHEMA), 13)
    anchors = [keys.of("session", s.session_id) for s in SESSIONS]
    before = [await admin.hgetall(anchor) for anchor in anchors]
    store = RedisStore(url, prefix)
    await store.open()
    try:
        await assert_sessions_moved(store.kernel)
        assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)
        # Each hash is the session's anchor now: its number, agent and the turn store's fields stay.
        assert [await admin.hgetall(anchor) for anchor in anchors] == [
            {field: value for field, value in fields.items() if field not in SESSION_MOVED} for fields in before
        ]
        assert await admin.hget(anchors[1], "running") == running.turn_id
        old = [keys.of("agent_sessions", agent) for agent in ("agent_zeta", "agent_alpha", HELD_AGENT)]
        assert await admin.exists(*old, keys.of("owners", "session"), keys.global_("schema_sessions")) == 0
        # Their turns run on: the running one still holds its session, the completed one is the next's history.
        assert await store.session_queue(SESSIONS[1].session_id) == [(running.turn_id, "in_progress")]
        assert (await store.get_turn_record(SESSIONS[0].session_id, done.turn_id)).status == "completed"
        later = turn_of(SESSIONS[0], "again")
        await store.start_turn(later, [user("again")])
        assert texts(await store.load_history(SESSIONS[0].session_id, later.turn_id)) == [
            "user:q",
            "assistant:a",
            "user:again",
        ]
        # A moved session is deleted as this version's are: record, anchor and turns in one script.
        await store.delete_session("agent_zeta", SESSIONS[0].session_id)
        assert await sessions(store.kernel).find(SESSIONS[0].session_id) is None
        assert await admin.exists(anchors[0], keys.of("turn", done.turn_id)) == 0
    finally:
        await store.close()


async def test_a_session_conversion_that_died_midway_finishes_without_duplicates(
    deployment: tuple[str, str], admin: Redis
) -> None:
    zeta = SESSIONS[0]

    def first(kernel: Kernel) -> Put:
        return sessions(kernel).put(zeta, owner=session_owner(zeta.session_id), mode="upsert")

    moved = (SESSION_KIND, assert_sessions_moved)
    await _finishes_after_dying(*deployment, admin, moved, write_layout_13, first, SESSION_MOVED)


async def test_a_session_conversion_run_twice_changes_nothing(deployment: tuple[str, str], admin: Redis) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    await _sessions_of_layout_13(url, prefix, admin)
    await admin.set(keys.global_(SCHEMA), 13)
    first = await _open_and_check_moved(url, prefix, SESSION_KIND, assert_sessions_moved)
    anchors = [await admin.hgetall(keys.of("session", s.session_id)) for s in SESSIONS]
    await admin.set(keys.global_(SCHEMA), 13)
    assert await _open_and_check_moved(url, prefix, SESSION_KIND, assert_sessions_moved) == first
    assert [await admin.hgetall(keys.of("session", s.session_id)) for s in SESSIONS] == anchors


# -- layout 15: responses get their records in the kernel (their hashes, turns and sessions stay) ------------------


async def _responses_of_layout_14(url: str, prefix: str, admin: Redis) -> dict[str, ResponseRecord]:
    """The responses as layout 14 kept them (stored through this version's store on a fresh database, their
    records deleted, the old indexes and owners written); each as stored, by id."""
    store = RedisStore(url, prefix)
    await store.open()  # a fresh database: no conversion
    try:
        stored = await store_responses(store)
    finally:
        await store.close()
    await write_layout_14(admin, Keys(prefix))
    return stored


async def test_responses_of_layout_14_get_their_records_and_stay_readable(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    stored = await _responses_of_layout_14(url, prefix, admin)
    hashes = [keys.of("response", head.response_id) for head in RESPONSE_HEADS]
    before = [await admin.hgetall(key) for key in hashes]
    store = RedisStore(url, prefix)
    await store.open()
    try:
        await assert_responses_moved(store.kernel)
        assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)
        # Each hash is the response still; only the number that ordered the old indexes goes, with them.
        assert [await admin.hgetall(key) for key in hashes] == [
            {field: value for field, value in fields.items() if field != "seq"} for fields in before
        ]
        old = [keys.of("conv_responses", talk) for talk in (TALK, OTHER)]
        assert await admin.exists(*old, keys.global_("responses"), keys.of("owners", "response")) == 0
        ids = [head.response_id for head in RESPONSE_HEADS]
        assert await store.responses_by_id(ids[::-1]) == [stored[response_id] for response_id in ids[::-1]]
        # The running one finishes as this version's do.
        running = stored[RUNNING]
        await store.finish_response(finished(running, "late"), [], [])
        assert (await store.get_response(RUNNING)).response.status == "completed"
        # A moved response is deleted as this version's are: its record with it, and its own session's.
        for response_id in ("resp_zeta", "resp_alpha"):
            record = stored[response_id]
            await store.delete_response(response_id)
            assert await response_heads(store.kernel).find(response_id) is None
            assert await admin.exists(keys.of("response", response_id), keys.of("turn", record.turn_id)) == 0
        assert await sessions(store.kernel).find(stored["resp_zeta"].session_id) is None
        assert await sessions(store.kernel).find(stored["resp_alpha"].session_id) is not None  # the conversation's
        talked = await response_heads(store.kernel).page(where=("conversation_id", TALK))
        assert [head.response_id for head in talked.items] == ["resp_beta"]
    finally:
        await store.close()


async def test_a_response_conversion_that_died_midway_finishes_without_duplicates(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    stored: list[dict[str, ResponseRecord]] = []

    async def write_old(admin: Redis, keys: Keys) -> None:
        if not stored:
            stored.append(await _responses_of_layout_14(url, prefix, admin))
        else:
            await write_layout_14(admin, keys)

    zeta = RESPONSE_HEADS[0]

    def first(kernel: Kernel) -> Put:
        return response_heads(kernel).put(zeta, owner=response_owner(zeta.response_id), mode="upsert")

    moved = (RESPONSE_KIND, assert_responses_moved)
    await _finishes_after_dying(url, prefix, admin, moved, write_old, first, ("seq",))


async def test_a_response_conversion_run_twice_changes_nothing(deployment: tuple[str, str], admin: Redis) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    await _responses_of_layout_14(url, prefix, admin)
    first = await _open_and_check_moved(url, prefix, RESPONSE_KIND, assert_responses_moved)
    hashes = [await admin.hgetall(keys.of("response", head.response_id)) for head in RESPONSE_HEADS]
    await admin.set(keys.global_(SCHEMA), 14)
    assert await _open_and_check_moved(url, prefix, RESPONSE_KIND, assert_responses_moved) == first
    assert [await admin.hgetall(keys.of("response", head.response_id)) for head in RESPONSE_HEADS] == hashes


async def test_a_fresh_database_is_not_converted_for_responses(deployment: tuple[str, str], admin: Redis) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    # Left by nobody's layout 14: a fresh database (no record ever numbered) skips the conversion.
    await admin.hset(keys.of("owners", "response"), ORPHAN_RESPONSE, json.dumps(ALICE))
    store = RedisStore(url, prefix)
    await store.open()
    await store.close()
    assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)
    assert await admin.hget(keys.of("owners", "response"), ORPHAN_RESPONSE) is not None


# -- layout 16: a turn's owner moves into its hash (the side hashes of owners go) ---------------------------------


async def _turns_of_layout_15(url: str, prefix: str, admin: Redis) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """Turns whose owners layout 15 kept beside them (stored through this version's store on a fresh database, the
    owners then moved out of their hashes): each one's owner JSON by id, and their hashes as this version wrote
    them."""
    store = RedisStore(url, prefix)
    await store.open()  # a fresh database: no conversion
    try:
        owners = await store_turns(store)
    finally:
        await store.close()
    keys = Keys(prefix)
    hashes = [await admin.hgetall(keys.of("turn", turn_id)) for turn_id in owners]
    await write_layout_15(admin, keys, owners)
    return owners, hashes


async def _open_and_check_owners(url: str, prefix: str, admin: Redis, owners: dict[str, Any]) -> list[dict[str, str]]:
    """Open a store (converting) and check the owners moved; the turns' hashes."""
    store = RedisStore(url, prefix)
    await store.open()
    try:
        await assert_owners_moved(store, admin, owners)
        assert await admin.get(Keys(prefix).global_(SCHEMA)) == str(SCHEMA_VERSION)
        return [await admin.hgetall(Keys(prefix).of("turn", turn_id)) for turn_id in owners]
    finally:
        await store.close()


async def test_turn_owners_of_layout_15_move_into_their_turns_hashes(deployment: tuple[str, str], admin: Redis) -> None:
    url, prefix = deployment
    owners, written = await _turns_of_layout_15(url, prefix, admin)
    # Each hash is as this version writes it: the owner's field where it has one, the rest unchanged.
    assert await _open_and_check_owners(url, prefix, admin, owners) == written
    assert [("owner" in fields) for fields in written] == [owner is not None for owner in owners.values()]
    # A moved owner goes with its turn, as this version's do.
    alices, _, _, responded = owners
    owned = {turn_id for turn_id, owner in owners.items() if owner is not None}
    session_id = await admin.hget(Keys(prefix).of("turn", alices), "session_id")
    store = RedisStore(url, prefix)
    await store.open()
    try:
        await store.delete_turn(session_id or "", alices)
        assert set(await store.turn_owners(list(owners))) == owned - {alices}
        await store.delete_session("agent_1", session_id or "")  # Bob's turn with it
        assert list(await store.turn_owners(list(owners))) == [responded]  # in a session of its own
    finally:
        await store.close()


async def test_a_turn_owner_conversion_that_died_midway_finishes(deployment: tuple[str, str], admin: Redis) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    owners, written = await _turns_of_layout_15(url, prefix, admin)
    # A first batch written (an owner in its hash), the side hash still whole.
    first = next(iter(owners))
    await admin.hset(keys.of("turn", first), "owner", written[0]["owner"])
    assert await _open_and_check_owners(url, prefix, admin, owners) == written


async def test_a_turn_owner_conversion_run_twice_changes_nothing(deployment: tuple[str, str], admin: Redis) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    owners, written = await _turns_of_layout_15(url, prefix, admin)
    assert await _open_and_check_owners(url, prefix, admin, owners) == written
    # Died after deleting the side hashes, before writing the version: run again, it finds nothing to move.
    await admin.set(keys.global_(SCHEMA), 15)
    assert await _open_and_check_owners(url, prefix, admin, owners) == written
    assert await admin.exists(keys.of("turn", ORPHANS[0])) == 0


async def _written_unconverted(admin: Redis, prefix: str, ops: list[Op]) -> None:
    """Write ``ops`` through the store's kernel, opened without converting (what a conversion that died had
    written)."""
    kernel = RedisKernel(admin, KINDS, prefix=f"{prefix}k:")
    await kernel.open()
    try:
        await kernel.write(ops)
    finally:
        await kernel.close()


# -- layout 17: items move into the kernel, under their containers ---------------------------------------------------

HOLDER = "forkhist_held"


async def _items_of_layout_16(url: str, prefix: str, admin: Redis) -> dict[str, list[Item]]:
    """Containers made by this version (a conversation, a response, a fork's holder) whose items are then written
    as layout 16 kept them, beside an orphan container's; the items each container holds, in order."""
    store = RedisStore(url, prefix)
    await store.open()
    try:
        conversation = ConversationRecord("conv_items", "sess_items", {}, 1)
        await store.create_conversation(conversation, [], session=SessionRecord("sess_items", None, "", utcnow()))
        start = response_start("q")
        await store.start_response(start)
        await Lineages(store.kernel).create(Lineage(id=HOLDER, of="conversation", source="", through=""), None)
    finally:
        await store.close()
    legacy: dict[str, list[Item]] = {
        conversation.conversation_id: [text_item("one"), text_item("two")],
        start.record.response.id: [text_item("input")],
        HOLDER: [text_item("kept for forks")],
        "conv_deleted_long_ago": [text_item("lost")],
    }
    keys = Keys(prefix)
    for container, items in legacy.items():
        # Scores against the items' order of writing: the order is the scores'.
        await admin.zadd(keys.of("items", container), {item.id or "": -n for n, item in enumerate(items)})
        await admin.hset(keys.of("item_bodies", container), mapping={i.id or "": i.model_dump_json() for i in items})
    await admin.set(keys.global_(SCHEMA), 16)
    held = {container: items[::-1] for container, items in legacy.items() if container != "conv_deleted_long_ago"}
    held[start.record.response.id][:0] = start.items  # this version's record already: the moved ones follow
    return held


async def _open_and_check_items(url: str, prefix: str, admin: Redis, held: dict[str, list[Item]]) -> None:
    store = RedisStore(url, prefix)
    await store.open()
    try:
        assert await store.items_of([*held, "conv_deleted_long_ago"]) == held
        assert await admin.get(Keys(prefix).global_(SCHEMA)) == str(SCHEMA_VERSION)
        assert [key async for key in admin.scan_iter(match=f"{prefix}item*")] == []
    finally:
        await store.close()


async def test_items_of_layout_16_move_into_the_kernel_under_their_containers(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    held = await _items_of_layout_16(url, prefix, admin)
    await _open_and_check_items(url, prefix, admin, held)
    conversation_id, response_id, _ = held
    store = RedisStore(url, prefix)
    await store.open()
    try:  # moved items are this version's: appended after, deleted with their container
        more = text_item("three")
        await store.add_items(conversation_id, [more])
        assert await store.all_items(conversation_id) == [*held[conversation_id], more]
        await store.delete_response(response_id)
        assert await store.all_items(response_id) == []
    finally:
        await store.close()


async def test_an_item_conversion_that_died_midway_finishes_without_duplicates(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    held = await _items_of_layout_16(url, prefix, admin)
    conversation_id = next(iter(held))
    first = held[conversation_id][0]
    await _written_unconverted(admin, prefix, item_puts(conversation_id, [first]))  # its container's keys stay
    await _open_and_check_items(url, prefix, admin, held)


# -- layout 18: a response's events move into its record's log ------------------------------------------------------


async def _response_events_of_layout_17(url: str, prefix: str, admin: Redis) -> tuple[str, list[StoredEvent]]:
    """A response made by this version, and events of it and of a response long gone as layout 17 kept them."""
    _, response_id = await _records(url, prefix)
    keys = Keys(prefix)
    events = [StoredEvent(seq, data(seq)) for seq in range(3)]
    await admin.zadd(keys.of(RESPONSE_EVENTS, response_id), {f"{e.seq}:{e.data}": e.seq for e in events[::-1]})
    await admin.zadd(keys.of(RESPONSE_EVENTS, "resp_deleted_long_ago"), {f"0:{data(0)}": 0})
    await admin.set(keys.global_(SCHEMA), 17)
    return response_id, events


async def test_response_events_of_layout_17_move_into_their_records_logs(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    response_id, events = await _response_events_of_layout_17(url, prefix, admin)
    # A conversion that died after writing part of a log (a rewrite of another's), its sorted set still there.
    await _written_unconverted(admin, prefix, [events_written(response_id, [events[0].data])])
    for _ in range(2):  # and one that died before writing its version runs again: the same logs
        store = RedisStore(url, prefix)
        await store.open()
        try:
            assert await store.events_after(response_id, -1) == events
            assert await store.events_after(response_id, 1) == events[2:]
            assert await store.events_after("resp_deleted_long_ago", -1) == []
        finally:
            await store.close()
        assert await admin.get(Keys(prefix).global_(SCHEMA)) == str(SCHEMA_VERSION)
        assert [key async for key in admin.scan_iter(match=f"{prefix}{RESPONSE_EVENTS}*")] == []
        await admin.set(Keys(prefix).global_(SCHEMA), 17)


# -- layout 19: conversations' anchors go -----------------------------------------------------------------------------


async def test_conversations_anchors_of_layout_18_go_and_responses_start_on_their_records(
    deployment: tuple[str, str], admin: Redis
) -> None:
    url, prefix = deployment
    keys = Keys(prefix)
    store = RedisStore(url, prefix)
    await store.open()
    try:
        conversation = ConversationRecord("conv_anchored", "sess_anchored", {}, 1)
        await store.create_conversation(conversation, [], session=SessionRecord("sess_anchored", None, "", utcnow()))
    finally:
        await store.close()
    anchors = [keys.of("conversation", "conv_anchored"), keys.of("session_convs", "sess_anchored")]
    await admin.hset(anchors[0], "session_id", "sess_anchored")  # as layout 18 kept them
    await admin.sadd(anchors[1], "conv_anchored")
    await admin.set(keys.global_(SCHEMA), 18)
    store = RedisStore(url, prefix)
    await store.open()
    try:
        assert await admin.exists(*anchors) == 0
        assert await admin.get(keys.global_(SCHEMA)) == str(SCHEMA_VERSION)
        await store.start_response(response_start("q", conversation))  # on the record alone
        other = ConversationRecord("conv_other", "sess_other", {}, 1)
        await store.create_conversation(other, [], session=SessionRecord("sess_other", None, "", utcnow()))
        await store.delete_conversation("conv_other")
        with pytest.raises(NotFoundError, match="conversation 'conv_other' not found"):
            await store.start_response(response_start("q", other))
    finally:
        await store.close()


# -- layout 20: file batches move into the kernel, under their vector stores ------------------------------------------

LAYOUT_19_BATCHES = {
    "vsfb_kept": FileBatchRecord("vsfb_kept", STORES[0].vector_store_id, 1740830410),
    "vsfb_cancelled": FileBatchRecord("vsfb_cancelled", STORES[0].vector_store_id, 1740830420, cancelled=True),
}


async def _write_layout_19_batches(url: str, prefix: str, admin: Redis) -> list[str]:
    """A store (through this version) with a file in a batch, and batches' hashes as layout 19 kept them, one of a
    store that no record holds; the hashes' keys."""
    keys = Keys(prefix)
    store = RedisStore(url, prefix)
    await store.open()
    try:
        vs = STORES[0].vector_store_id
        await store.create_vector_store(STORES[0], [])
        await store.add_vector_store_files(vs, [VectorStoreFileRecord(vs, "file_b", 1, batch_id="vsfb_kept")])
    finally:
        await store.close()
    hashes = {**{batch_id: (b.vector_store_id, b.created_at, int(b.cancelled)) for batch_id, b in
                 LAYOUT_19_BATCHES.items()}, "vsfb_lost": ("vs_gone", 1740830400, 0)}  # fmt: skip
    for batch_id, (vs, created_at, cancelled) in hashes.items():
        mapping = {"vector_store_id": vs, "created_at": created_at, "cancelled": cancelled}
        await admin.hset(keys.of("batch", batch_id), mapping=mapping)  # type: ignore[arg-type]
    await admin.set(keys.global_(SCHEMA), 19)
    return [keys.of("batch", batch_id) for batch_id in hashes]


async def _assert_batches_moved(url: str, prefix: str, admin: Redis, hashes: list[str]) -> None:
    store = RedisStore(url, prefix)
    await store.open()
    try:
        assert await admin.get(Keys(prefix).global_(SCHEMA)) == str(SCHEMA_VERSION)
        assert await admin.exists(*hashes) == 0
        for batch in LAYOUT_19_BATCHES.values():
            assert await file_batch(store.kernel, batch.vector_store_id, batch.batch_id) == batch
        with pytest.raises(NotFoundError):
            await file_batch(store.kernel, "vs_gone", "vsfb_lost")
        await store.cancel_file_batch(STORES[0].vector_store_id, "vsfb_kept")  # its files' index stayed
        [cancelled] = (await store.list_vector_store_files(STORES[0].vector_store_id, None, 10, "asc")).items
        assert (cancelled.file_id, cancelled.status) == ("file_b", "cancelled")
    finally:
        await store.close()


async def test_file_batches_of_layout_19_move_into_the_kernel_under_their_stores(
    deployment: tuple[str, str], admin: Redis
) -> None:
    hashes = await _write_layout_19_batches(*deployment, admin)
    await _assert_batches_moved(*deployment, admin, hashes)


async def test_a_file_batch_conversion_that_died_midway_finishes(deployment: tuple[str, str], admin: Redis) -> None:
    url, prefix = deployment
    hashes = await _write_layout_19_batches(url, prefix, admin)
    kernel = RedisKernel(admin, KINDS, prefix=f"{prefix}k:")
    await kernel.open()
    try:  # the first batch written, its hash not yet deleted
        first = LAYOUT_19_BATCHES["vsfb_kept"]
        body = {"batch_id": first.batch_id, "vector_store_id": first.vector_store_id,
                "created_at": first.created_at, "cancelled": False}  # fmt: skip
        await kernel.write([Put(FILE_BATCH, first.batch_id, body, parent=first.vector_store_id)])
    finally:
        await kernel.close()
    await _assert_batches_moved(url, prefix, admin, hashes)
