"""The storage contract for shield registrations (records over each backend's kernel), over every backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from storage_backends import BACKENDS

from ferryman.api.safety import ShieldResource
from ferryman.errors import ConflictError, NotFoundError
from ferryman.storage.domain import registry
from ferryman.storage.domain.records import Records

pytestmark = pytest.mark.anyio


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Records[ShieldResource]]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield registry.shields(opened.kernel)


def guard(shield_id: str, model: str = "guard-model") -> ShieldResource:
    return ShieldResource(
        identifier=shield_id,
        provider_id="llama-guard",
        provider_resource_id=model,
        params={"excluded_categories": ["S6"], "fail_open": False, "timeout_seconds": 2.5},
    )


async def test_a_created_shield_reads_back_whole(store: Records[ShieldResource]) -> None:
    shield = guard("guard")
    await store.create(shield)
    assert await store.get("guard") == shield


async def test_shields_list_in_registration_order(store: Records[ShieldResource]) -> None:
    for shield_id in ("b", "a", "c"):
        await store.create(guard(shield_id))
    assert [s.identifier for s in await store.all()] == ["b", "a", "c"]


async def test_creating_a_taken_id_conflicts_and_keeps_the_first(store: Records[ShieldResource]) -> None:
    await store.create(guard("g", "first"))
    with pytest.raises(ConflictError):
        await store.create(guard("g", "second"))
    assert (await store.get("g")).provider_resource_id == "first"
    assert [s.identifier for s in await store.all()] == ["g"]


async def test_delete_tells_whether_it_existed_and_the_shield_is_gone(store: Records[ShieldResource]) -> None:
    await store.create(guard("g"))
    await store.create(guard("h"))
    assert await store.delete("g") is True
    assert await store.delete("g") is False
    with pytest.raises(NotFoundError):
        await store.get("g")
    assert [s.identifier for s in await store.all()] == ["h"]


async def test_a_deleted_id_can_be_registered_again_and_lists_last(store: Records[ShieldResource]) -> None:
    await store.create(guard("g"))
    await store.create(guard("h"))
    await store.delete("g")
    await store.create(guard("g", "again"))
    assert [s.identifier for s in await store.all()] == ["h", "g"]
    assert (await store.get("g")).provider_resource_id == "again"


async def test_shields_and_toolgroups_do_not_share_ids(store: Records[ShieldResource]) -> None:
    await store.create(guard("same"))
    toolgroups = registry.toolgroups(store.kernel)
    assert await toolgroups.all() == []
    with pytest.raises(NotFoundError):
        await toolgroups.get("same")


async def test_an_unknown_shield_is_not_found(store: Records[ShieldResource]) -> None:
    with pytest.raises(NotFoundError):
        await store.get("nope")
    assert await store.all() == []
