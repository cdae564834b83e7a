"""Redis: a turn's owner is a field of the turn's own hash, so it goes with the turn, whatever deletes it.

The storage contract checks what every backend answers; this checks the Redis keys beneath: ``TURN_START`` (a
turn's start, and a response's, which starts its turn) writes the owner into the turn's hash and nowhere else,
and after ``delete_turn``, ``delete_session`` or ``delete_response`` no key under the store's prefix names the
owner any more (layout 15 kept owners in a side hash that no deletion touched). ``turn_owners`` reads them back.
"""

from __future__ import annotations

import pytest
from redis.asyncio import Redis
from redis_beneath import admin_fixture, store_fixture  # noqa: F401  (fixtures)
from store_records import complete, new_conversation, response_start, turn_of, user

from ferryman.ids import new_id, utcnow
from ferryman.storage.base import SessionRecord, TurnRecord
from ferryman.storage.kernel.model import Owner
from ferryman.storage.owners import dump_owner
from ferryman.storage.redis.store import RedisStore

pytestmark = pytest.mark.anyio


def someone() -> Owner:
    """An owner whose id no other test writes, so that a scan for it finds only what names it."""
    return Owner("api_key", f"owner_{new_id()}", {"teams": ("red",)})


async def new_session(store: RedisStore) -> SessionRecord:
    """An unowned session of an agent (its record names no owner)."""
    session = SessionRecord(new_id(), "agent_1", "s", utcnow())
    await store.create_session(session)
    return session


async def owned_turn(store: RedisStore, session: SessionRecord, owner: Owner | None, ends: bool = True) -> TurnRecord:
    """A turn of ``session`` started with ``owner`` (completed, unless not ``ends``)."""
    record = turn_of(session, "q")
    await store.start_turn(record, [user("q")], owner=owner)
    if ends:
        await complete(store, record, "a")
    return record


async def naming(store: RedisStore, admin: Redis, owner: Owner) -> list[str]:
    """The keys under the store's prefix whose name or content holds the owner's id."""
    found = []
    async for key in admin.scan_iter(match=f"{store._keys.prefix}*"):
        kind = await admin.type(key)
        if kind == "hash":
            content = [entry for pair in (await admin.hgetall(key)).items() for entry in pair]
        elif kind == "zset":
            content = await admin.zrange(key, 0, -1)
        elif kind == "set":
            content = list(await admin.smembers(key))
        elif kind == "list":
            content = await admin.lrange(key, 0, -1)
        else:
            content = [await admin.get(key) or ""] if kind == "string" else []
        if any(owner.id in entry for entry in [key, *content]):
            found.append(key)
    return found


async def test_a_started_turns_hash_holds_its_owner_and_no_side_hash_is_written(
    store: RedisStore, admin: Redis
) -> None:
    alice, bob = someone(), someone()
    session = await new_session(store)
    owned = await owned_turn(store, session, alice)
    unowned = await owned_turn(store, session, None)
    responded = response_start("q")
    await store.start_response(responded, owner=bob)

    turn = [store._keys.of("turn", record.turn_id) for record in (owned, unowned, responded.turn)]
    assert [await admin.hget(key, "owner") for key in turn] == [dump_owner(alice), None, dump_owner(bob)]
    assert await naming(store, admin, alice) == [turn[0]]
    assert [key async for key in admin.scan_iter(match=f"{store._keys.base('owners')}*")] == []


async def test_a_turns_owner_goes_with_delete_turn(store: RedisStore, admin: Redis) -> None:
    alice = someone()
    session = await new_session(store)
    kept, deleted = await owned_turn(store, session, someone()), await owned_turn(store, session, alice)
    await store.delete_turn(session.session_id, deleted.turn_id)
    assert await naming(store, admin, alice) == []
    assert list(await store.turn_owners([kept.turn_id, deleted.turn_id])) == [kept.turn_id]


async def test_a_turns_owner_goes_with_delete_session(store: RedisStore, admin: Redis) -> None:
    alice = someone()
    session = await new_session(store)
    ended, running = await owned_turn(store, session, alice), await owned_turn(store, session, alice, ends=False)
    await store.delete_session("agent_1", session.session_id)
    assert await naming(store, admin, alice) == []
    assert await store.turn_owners([ended.turn_id, running.turn_id]) == {}


@pytest.mark.parametrize("in_conversation", [False, True], ids=["own session", "conversation"])
async def test_a_response_turns_owner_goes_with_delete_response(
    store: RedisStore, admin: Redis, in_conversation: bool
) -> None:
    # Outside a conversation the response's session (its record stamped with the same owner) goes too.
    alice = someone()
    responded = response_start("q", await new_conversation(store) if in_conversation else None)
    await store.start_response(responded, owner=alice)
    await store.delete_response(responded.record.response.id)
    assert await naming(store, admin, alice) == []
    assert await store.turn_owners([responded.turn.turn_id]) == {}


async def test_turn_owners_reads_several_turns_at_once_and_leaves_out_missing_and_unowned_ones(
    store: RedisStore,
) -> None:
    alice, bob = someone(), someone()
    first, second = await new_session(store), await new_session(store)
    alices = await owned_turn(store, first, alice)
    unowned = await owned_turn(store, first, None)
    bobs = await owned_turn(store, second, bob, ends=False)
    asked = [bobs.turn_id, "turn_missing", unowned.turn_id, alices.turn_id, bobs.turn_id]
    assert await store.turn_owners(asked) == {alices.turn_id: alice, bobs.turn_id: bob}


async def test_turn_owners_of_no_turns_asks_nothing(store: RedisStore) -> None:
    closed = RedisStore(store._url, store._keys.prefix)  # never opened: any trip to Redis would raise
    assert await closed.turn_owners([]) == {}
