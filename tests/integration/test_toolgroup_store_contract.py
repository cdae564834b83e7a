"""The storage contract for toolgroup registrations (records over each backend's kernel), over every backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from storage_backends import BACKENDS

from ferryman.api.registry import McpEndpoint, ToolGroup
from ferryman.errors import ConflictError, NotFoundError
from ferryman.storage.domain import registry
from ferryman.storage.domain.records import Records

pytestmark = pytest.mark.anyio


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Records[ToolGroup]]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield registry.toolgroups(opened.kernel)


def mcp_group(group_id: str, uri: str = "http://127.0.0.1:9/mcp") -> ToolGroup:
    return ToolGroup(
        identifier=group_id,
        provider_id="model-context-protocol",
        provider_resource_id=group_id,
        mcp_endpoint=McpEndpoint(uri=uri),
        args={"depth": 2, "tags": ["a"]},
    )


async def test_a_created_toolgroup_reads_back_whole(store: Records[ToolGroup]) -> None:
    group = mcp_group("mcp::files")
    await store.create(group)
    assert await store.get("mcp::files") == group


async def test_toolgroups_list_in_registration_order(store: Records[ToolGroup]) -> None:
    for group_id in ("b", "a", "c"):
        await store.create(mcp_group(group_id))
    assert [g.identifier for g in await store.all()] == ["b", "a", "c"]


async def test_creating_a_taken_id_conflicts_and_keeps_the_first(store: Records[ToolGroup]) -> None:
    await store.create(mcp_group("g", "http://first/mcp"))
    with pytest.raises(ConflictError):
        await store.create(mcp_group("g", "http://second/mcp"))
    stored = await store.get("g")
    assert stored.mcp_endpoint == McpEndpoint(uri="http://first/mcp")
    assert [g.identifier for g in await store.all()] == ["g"]


async def test_delete_tells_whether_it_existed_and_the_group_is_gone(store: Records[ToolGroup]) -> None:
    await store.create(mcp_group("g"))
    await store.create(mcp_group("h"))
    assert await store.delete("g") is True
    assert await store.delete("g") is False
    with pytest.raises(NotFoundError):
        await store.get("g")
    assert [g.identifier for g in await store.all()] == ["h"]


async def test_a_deleted_id_can_be_registered_again_and_lists_last(store: Records[ToolGroup]) -> None:
    await store.create(mcp_group("g"))
    await store.create(mcp_group("h"))
    await store.delete("g")
    await store.create(mcp_group("g", "http://again/mcp"))
    assert [g.identifier for g in await store.all()] == ["h", "g"]
    assert (await store.get("g")).mcp_endpoint == McpEndpoint(uri="http://again/mcp")


async def test_an_unknown_toolgroup_is_not_found(store: Records[ToolGroup]) -> None:
    with pytest.raises(NotFoundError):
        await store.get("nope")
    assert await store.all() == []
