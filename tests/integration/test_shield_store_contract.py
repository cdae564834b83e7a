"""The storage contract for shield registrations, over every backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from storage_backends import BACKENDS

from ferryman.api.safety import ShieldResource
from ferryman.errors import ConflictError, NotFoundError
from ferryman.storage.base import Store

pytestmark = pytest.mark.anyio


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield opened


def guard(shield_id: str, model: str = "guard-model") -> ShieldResource:
    return ShieldResource(
        identifier=shield_id,
        provider_id="llama-guard",
        provider_resource_id=model,
        params={"excluded_categories": ["S6"], "fail_open": False, "timeout_seconds": 2.5},
    )


async def test_a_created_shield_reads_back_whole(store: Store) -> None:
    shield = guard("guard")
    await store.create_shield(shield)
    assert await store.get_shield("guard") == shield


async def test_shields_list_in_registration_order(store: Store) -> None:
    for shield_id in ("b", "a", "c"):
        await store.create_shield(guard(shield_id))
    assert [s.identifier for s in await store.list_shields()] == ["b", "a", "c"]


async def test_creating_a_taken_id_conflicts_and_keeps_the_first(store: Store) -> None:
    await store.create_shield(guard("g", "first"))
    with pytest.raises(ConflictError):
        await store.create_shield(guard("g", "second"))
    assert (await store.get_shield("g")).provider_resource_id == "first"
    assert [s.identifier for s in await store.list_shields()] == ["g"]


async def test_delete_tells_whether_it_existed_and_the_shield_is_gone(store: Store) -> None:
    await store.create_shield(guard("g"))
    await store.create_shield(guard("h"))
    assert await store.delete_shield("g") is True
    assert await store.delete_shield("g") is False
    with pytest.raises(NotFoundError):
        await store.get_shield("g")
    assert [s.identifier for s in await store.list_shields()] == ["h"]


async def test_a_deleted_id_can_be_registered_again_and_lists_last(store: Store) -> None:
    await store.create_shield(guard("g"))
    await store.create_shield(guard("h"))
    await store.delete_shield("g")
    await store.create_shield(guard("g", "again"))
    assert [s.identifier for s in await store.list_shields()] == ["h", "g"]
    assert (await store.get_shield("g")).provider_resource_id == "again"


async def test_shields_and_toolgroups_do_not_share_ids(store: Store) -> None:
    await store.create_shield(guard("same"))
    assert await store.list_toolgroups() == []
    with pytest.raises(NotFoundError):
        await store.get_toolgroup("same")


async def test_an_unknown_shield_is_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError):
        await store.get_shield("nope")
    assert await store.list_shields() == []
