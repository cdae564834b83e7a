"""The storage contract of API keys: the domain store over the kernel of every backend of ``storage_backends``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from storage_backends import BACKENDS

from ferryman.auth.api_keys import hash_key, key_record, new_key
from ferryman.errors import ConflictError
from ferryman.storage.domain.api_keys import ApiKeys

pytestmark = pytest.mark.anyio


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ApiKeys]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield ApiKeys(opened.kernel)


def same_moment(a: datetime | None, b: datetime) -> bool:
    return a is not None and abs((a - b).total_seconds()) < 0.001


async def test_a_key_is_found_by_its_hash_with_what_it_grants(store: ApiKeys) -> None:
    key = new_key()
    record = key_record("ci-bot", key, {"roles": ["admin", "admin", "dev"], "teams": ["ml"], "projects": []})
    await store.create(record)
    found = await store.by_hash(hash_key(key))
    assert found is not None
    assert (found.name, found.key_hash, found.revoked_at) == ("ci-bot", hash_key(key), None)
    assert found.attributes == {"roles": ("admin", "dev"), "teams": ("ml",)}
    assert same_moment(found.created_at, record.created_at)
    assert await store.by_hash(hash_key(new_key())) is None


async def test_names_are_unique_even_after_revocation(store: ApiKeys) -> None:
    await store.create(key_record("bot", new_key(), {}))
    with pytest.raises(ConflictError):
        await store.create(key_record("bot", new_key(), {}))
    assert await store.revoke("bot", datetime.now(UTC))
    with pytest.raises(ConflictError):
        await store.create(key_record("bot", new_key(), {}))
    assert [k.name for k in await store.list()] == ["bot"]


async def test_revocation_is_seen_by_the_lookup_and_keeps_its_first_time(store: ApiKeys) -> None:
    key = new_key()
    await store.create(key_record("bot", key, {"roles": ["dev"]}))
    first = datetime.now(UTC)
    assert await store.revoke("bot", first)
    assert await store.revoke("bot", first + timedelta(hours=1))
    found = await store.by_hash(hash_key(key))
    assert found is not None and same_moment(found.revoked_at, first)
    assert found.attributes == {"roles": ("dev",)}
    assert not await store.revoke("nobody", first)


async def test_keys_are_listed_by_name_without_the_key(store: ApiKeys) -> None:
    keys = {name: new_key() for name in ("zeta", "alpha", "mid")}
    for name, key in keys.items():
        await store.create(key_record(name, key, {}))
    await store.revoke("mid", datetime.now(UTC))
    listed = await store.list()
    assert [(k.name, k.revoked_at is not None) for k in listed] == [("alpha", False), ("mid", True), ("zeta", False)]
    assert {k.key_hash for k in listed} == {hash_key(key) for key in keys.values()}
