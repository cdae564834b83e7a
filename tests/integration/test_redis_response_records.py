"""Redis: a response's kernel record and its hash are written, refused and deleted together, one script each.

The storage contract checks what every backend answers; this checks the Redis keys beneath: ``START_RESPONSE``
writes the response's record (with its owner, in the batch that opens its session's, when it opens one) only once
every refusal of its own has passed, and the kernel's batch refuses before the script writes anything;
``DELETE_RESPONSE`` deletes the record with the response (and its own session's record with the session). No
index of the store's lists responses, nor holds their owners: the records do.
"""

from __future__ import annotations

from typing import cast

import pytest
from redis.asyncio import Redis
from redis_beneath import admin_fixture, store_fixture  # noqa: F401  (fixtures)
from store_records import new_conversation, new_response, response_start, text_item

from ferryman.errors import ConflictError, InvalidRequestError, NotFoundError
from ferryman.storage.base import ResponseStart
from ferryman.storage.domain.agents import sessions
from ferryman.storage.domain.responses import ResponseHead, head_of, response_heads
from ferryman.storage.kernel.model import Owner
from ferryman.storage.redis.store import RedisStore

pytestmark = pytest.mark.anyio

ALICE = Owner("api_key", "alice")


async def response_hash(store: RedisStore, admin: Redis, response_id: str) -> dict[str, str]:
    """The response's hash (empty: none)."""
    return cast(dict[str, str], await admin.hgetall(store._keys.of("response", response_id)))


async def nothing_stored(store: RedisStore, admin: Redis, start: ResponseStart) -> None:
    """Neither the response (record, hash, items) nor its turn, nor the session it would open, is there."""
    response_id = start.record.response.id
    assert await response_heads(store.kernel).find(response_id) is None
    assert await response_hash(store, admin, response_id) == {}
    keys = [store._keys.of("turn", start.turn.turn_id), store._keys.of("items", response_id)]
    if start.session is not None:
        assert await sessions(store.kernel).find(start.session.session_id) is None
        keys.append(store._keys.of("session", start.session.session_id))
    assert await admin.exists(*keys) == 0


async def test_a_responses_record_holds_what_lists_it_and_its_owner_and_no_index_of_the_store_does(
    store: RedisStore, admin: Redis
) -> None:
    conversation = await new_conversation(store)
    alone = response_start("q")
    talked = response_start("q", conversation)
    for start in (alone, talked):
        await store.start_response(start, owner=ALICE)
    found = [await response_heads(store.kernel).find(s.record.response.id) for s in (alone, talked)]
    assert [(f.value, f.rec.owner, f.rec.at) for f in found if f is not None] == [
        (head_of(s.record), ALICE, float(s.record.response.created_at)) for s in (alone, talked)
    ]
    assert [f.value.conversation_id for f in found if f is not None] == [None, conversation.conversation_id]
    opened = await sessions(store.kernel).find(alone.record.session_id)
    assert opened is not None and opened.rec.owner == ALICE  # in the same batch as the response's
    assert set(await response_hash(store, admin, alone.record.response.id)) == {
        "turn_id",
        "session_id",
        "conversation_id",
        "previous_response_id",
        "background",
        "body",
    }
    gone = [
        store._keys.global_("responses"),
        store._keys.of("conv_responses", conversation.conversation_id),
        store._keys.of("owners", "response"),
    ]
    assert await admin.exists(*gone) == 0


async def test_a_record_without_its_response_refuses_the_start_before_any_write(
    store: RedisStore, admin: Redis
) -> None:
    # None of the script's own checks sees it: the kernel's batch refuses, before the script writes anything.
    conversation = await new_conversation(store)
    for taken in (response_start("q"), response_start("q", conversation)):
        await response_heads(store.kernel).create(head_of(taken.record))
        with pytest.raises(ConflictError, match="already exists"):
            await store.start_response(taken, owner=ALICE)
        assert await response_hash(store, admin, taken.record.response.id) == {}
        assert await admin.exists(store._keys.of("turn", taken.turn.turn_id)) == 0
        if taken.session is not None:
            assert await sessions(store.kernel).find(taken.session.session_id) is None
            assert await admin.exists(store._keys.of("session", taken.session.session_id)) == 0
    # The conversation's session runs no turn: the refused one never held it.
    assert await admin.hget(store._keys.of("session", conversation.session_id), "running") is None


async def test_a_start_its_script_refuses_writes_no_record(store: RedisStore, admin: Redis) -> None:
    repeated = text_item("twice")
    refused = response_start("q", items=[repeated, repeated])
    with pytest.raises(InvalidRequestError):
        await store.start_response(refused, owner=ALICE)
    await nothing_stored(store, admin, refused)
    # The turn's refusal too: a conversation runs one response at a time.
    conversation = await new_conversation(store)
    await new_response(store, "first", conversation)
    busy = response_start("second", conversation)
    with pytest.raises(ConflictError, match="in progress"):
        await store.start_response(busy, owner=ALICE)
    await nothing_stored(store, admin, busy)
    # And a conversation deleted before the response could start in it.
    gone = await new_conversation(store)
    late = response_start("q", gone)
    await store.delete_conversation(gone.conversation_id)
    with pytest.raises(NotFoundError, match="conversation"):
        await store.start_response(late, owner=ALICE)
    await nothing_stored(store, admin, late)


async def test_a_response_deletes_its_record_and_its_own_sessions_with_itself(store: RedisStore, admin: Redis) -> None:
    alone = response_start("q")
    await store.start_response(alone, owner=ALICE)
    await store.delete_response(alone.record.response.id)
    assert await response_heads(store.kernel).find(alone.record.response.id) is None
    assert await response_hash(store, admin, alone.record.response.id) == {}
    assert await sessions(store.kernel).find(alone.record.session_id) is None
    assert await admin.exists(store._keys.of("session", alone.record.session_id)) == 0


async def test_a_response_in_a_conversation_deletes_its_record_and_leaves_the_sessions(
    store: RedisStore, admin: Redis
) -> None:
    conversation = await new_conversation(store)
    record, turn = await new_response(store, "q", conversation)
    await store.delete_response(record.response.id)
    assert await response_heads(store.kernel).find(record.response.id) is None
    assert await admin.exists(store._keys.of("response", record.response.id), store._keys.of("turn", turn.turn_id)) == 0
    assert await sessions(store.kernel).find(conversation.session_id) is not None
    assert await admin.exists(store._keys.of("session", conversation.session_id)) == 1
    with pytest.raises(NotFoundError):
        await store.delete_response(record.response.id)


async def test_responses_are_read_by_id_in_one_trip_and_listed_by_their_records(store: RedisStore) -> None:
    conversation = await new_conversation(store)
    first, _ = await new_response(store, "a")
    talked, _ = await new_response(store, "b", conversation)
    assert await store.responses_by_id([talked.response.id, "resp_missing", first.response.id]) == [talked, first]
    listed = await response_heads(store.kernel).page(where=("conversation_id", conversation.conversation_id))
    assert listed.items == [ResponseHead(talked.response.id, conversation.conversation_id, talked.response.created_at)]
