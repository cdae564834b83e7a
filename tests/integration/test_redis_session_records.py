"""Redis: a session's kernel record and its anchor are written, refused and deleted together, one script each.

The storage contract checks what every backend answers; this checks the Redis keys beneath: every script that
makes or deletes a session (``CREATE_SESSION``, ``DELETE_SESSION``, a response's ``START_RESPONSE`` opening one,
``DELETE_RESPONSE`` of a response outside a conversation) leaves the record and the anchor both there or both
gone, and the anchor holds only what the turn scripts read.
"""

from __future__ import annotations

from typing import cast

import pytest
from redis.asyncio import Redis
from redis_beneath import admin_fixture, store_fixture  # noqa: F401  (fixtures)
from store_records import new_conversation, new_response, response_start, start, text_item

from ferryman.errors import ConflictError, InvalidRequestError, NotFoundError
from ferryman.ids import new_id, utcnow
from ferryman.storage.base import SessionRecord
from ferryman.storage.domain.agents import sessions
from ferryman.storage.kernel.model import Owner
from ferryman.storage.redis.store import RedisStore

pytestmark = pytest.mark.anyio

ALICE = Owner("api_key", "alice")


async def anchor(store: RedisStore, admin: Redis, session_id: str) -> dict[str, str]:
    """The session's hash (empty: none)."""
    return cast(dict[str, str], await admin.hgetall(store._keys.of("session", session_id)))


async def test_a_sessions_record_holds_its_fields_and_owner_and_its_anchor_what_turns_read(
    store: RedisStore, admin: Redis
) -> None:
    of_agent = SessionRecord(new_id(), "agent_1", "named", utcnow())
    of_none = SessionRecord(new_id(), None, "response", utcnow())
    await store.create_session(of_agent, owner=ALICE)
    await store.create_session(of_none)
    found = [await sessions(store.kernel).find(s.session_id) for s in (of_agent, of_none)]
    assert [(f.value, f.rec.owner) for f in found if f is not None] == [(of_agent, ALICE), (of_none, None)]
    assert set(await anchor(store, admin, of_agent.session_id)) == {"seq", "agent_id"}
    assert set(await anchor(store, admin, of_none.session_id)) == {"seq"}
    assert await admin.exists(store._keys.of("owners", "session")) == 0
    turn = await start(store, of_none, "q")
    assert (await store.get_turn_record(of_none.session_id, turn.turn_id)).agent_id is None


async def test_a_record_without_its_anchor_refuses_the_session_and_no_anchor_is_written(
    store: RedisStore, admin: Redis
) -> None:
    # Neither the anchor's check nor the script's other checks see it: the kernel's batch refuses, before any write.
    taken = response_start("q")
    assert taken.session is not None
    await sessions(store.kernel).create(taken.session)
    with pytest.raises(ConflictError, match="already exists"):
        await store.create_session(taken.session)
    with pytest.raises(ConflictError, match="already exists"):
        await store.start_response(taken, owner=ALICE)
    assert await anchor(store, admin, taken.session.session_id) == {}
    with pytest.raises(NotFoundError):
        await store.get_response(taken.record.response.id)


async def test_a_refused_response_start_writes_no_session_record(store: RedisStore, admin: Redis) -> None:
    repeated = text_item("twice")
    refused = response_start("q", items=[repeated, repeated])
    with pytest.raises(InvalidRequestError):
        await store.start_response(refused, owner=ALICE)
    assert await sessions(store.kernel).find(refused.record.session_id) is None
    assert await anchor(store, admin, refused.record.session_id) == {}


async def test_a_response_opens_its_sessions_record_and_deletes_it_with_itself(store: RedisStore, admin: Redis) -> None:
    opening = response_start("q")
    await store.start_response(opening, owner=ALICE)
    found = await sessions(store.kernel).find(opening.record.session_id)
    assert found is not None and (found.value, found.rec.owner) == (opening.session, ALICE)
    assert set(await anchor(store, admin, opening.record.session_id)) == {"seq", "running"}

    await store.delete_response(opening.record.response.id)

    assert await sessions(store.kernel).find(opening.record.session_id) is None
    assert await anchor(store, admin, opening.record.session_id) == {}


async def test_deleting_a_response_in_a_conversation_keeps_the_conversations_session(
    store: RedisStore, admin: Redis
) -> None:
    conversation = await new_conversation(store)
    record, _ = await new_response(store, "q", conversation)
    await store.delete_response(record.response.id)
    assert await sessions(store.kernel).find(conversation.session_id) is not None
    assert await anchor(store, admin, conversation.session_id) != {}


async def test_a_session_refused_to_another_agent_keeps_its_record(store: RedisStore, admin: Redis) -> None:
    session = SessionRecord(new_id(), "agent_1", "s", utcnow())
    await store.create_session(session)
    with pytest.raises(NotFoundError):
        await store.delete_session("agent_2", session.session_id)
    assert await sessions(store.kernel).find(session.session_id) is not None
    await store.delete_session("agent_1", session.session_id)
    assert await sessions(store.kernel).find(session.session_id) is None
    assert await anchor(store, admin, session.session_id) == {}
