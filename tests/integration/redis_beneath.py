"""Fixtures for the tests of the Redis keys beneath a store's scripts: a store on a database of its own, and a
plain client to read the keys it writes (import both fixture functions into the test module)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis
from replicas import redis_database

from ferryman.redis_url import split_prefix
from ferryman.storage.redis.store import RedisStore


@pytest.fixture(name="store")
async def store_fixture() -> AsyncIterator[RedisStore]:
    with redis_database() as prefixed:
        opened = RedisStore(*split_prefix(prefixed))
        await opened.open()
        try:
            yield opened
        finally:
            await opened.close()


@pytest.fixture(name="admin")
async def admin_fixture(store: RedisStore) -> AsyncIterator[Redis]:
    client = Redis.from_url(store._url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()
