"""Redis data an older ferryman wrote (stream events as whole SSE frames) is converted once, at open."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import pytest
from redis.asyncio import Redis
from replicas import redis_database

from ferryman.api.responses import Response
from ferryman.engine.ids import new_id, utcnow
from ferryman.errors import ConfigurationError
from ferryman.redis_url import split_prefix
from ferryman.storage.base import ResponseRecord, SessionRecord, StoredEvent, TurnRecord
from ferryman.storage.redis_keys import RESPONSE_EVENTS, SCHEMA, SCHEMA_LOCK, TURN_EVENTS, Keys
from ferryman.storage.redis_store import RedisStore
from ferryman.storage.redis_upgrade import SCHEMA_VERSION

pytestmark = pytest.mark.anyio


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
        session = SessionRecord(new_id(), None, "s", utcnow())
        await store.create_session(session)
        turn = TurnRecord(new_id(), session.session_id, None, "in_progress", [], utcnow())
        await store.start_turn(turn, [])
        response = Response(id=f"resp_{new_id()}", created_at=1, status="completed", model="m")
        await store.save_response(ResponseRecord(response, turn.turn_id, session.session_id))
        return turn.turn_id, response.id
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
