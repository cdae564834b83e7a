"""Vector stores as kernel records, through :class:`VectorStoreService` on SQLite, PostgreSQL and Redis.

A store's record holds its owner, written with the store's index in one transaction; a caller reads, pages,
changes and deletes only what the access policy lets it (another's store looks missing, for the store and for
everything of it), and a page is filtered in the kernel's query: one read, however many stores others own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from storage_backends import BACKENDS
from test_files_on_kernel import ALICE, BOB, CAROL, TEAM_READS  # the callers and the team policy files are tested with

from ferryman.api.vector_stores import AttachFileRequest, UpdateVectorStoreRequest
from ferryman.auth.policy import AccessPolicy
from ferryman.auth.principal import Principal, acting_as
from ferryman.errors import ConflictError, ForbiddenError, NotFoundError
from ferryman.inference.router import ModelRouter
from ferryman.knowledge.blobs import MemoryBlobStore
from ferryman.services.access import Access
from ferryman.services.files import FileService
from ferryman.services.vector_stores import VectorStoreService
from ferryman.storage.base import Store
from ferryman.storage.domain.kinds import VECTOR_STORE
from ferryman.storage.domain.vector_stores import vector_stores
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.counting import CountingKernel
from ferryman.storage.kernel.model import Owner
from ferryman.storage.knowledge import VectorStoreFileRecord, VectorStoreRecord

pytestmark = pytest.mark.anyio


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield opened


def service(store: Store, policy: AccessPolicy | None = None) -> tuple[VectorStoreService, CountingKernel]:
    kernel = CountingKernel(store.kernel)
    access = Access(policy or AccessPolicy())
    files = FileService(kernel, access, store, MemoryBlobStore())
    return VectorStoreService(store, kernel, access, ModelRouter([]), files), kernel


def owner_of(who: Principal) -> Owner | None:
    return Access(AccessPolicy()).owner(who)


def a_record(vector_store_id: str, created_at: int = 100) -> VectorStoreRecord:
    return VectorStoreRecord(vector_store_id, "s", created_at, "m", 3, last_active_at=created_at)


async def make(
    store: Store, vector_store_id: str, who: Principal, created_at: int = 100, file_id: str = "file_a"
) -> None:
    attachment = VectorStoreFileRecord(vector_store_id=vector_store_id, file_id=file_id, created_at=created_at)
    await store.create_vector_store(a_record(vector_store_id, created_at), [attachment], owner_of(who))


async def test_each_caller_pages_through_its_own_stores_in_one_read(store: Store) -> None:
    for i in range(6):
        await make(store, f"vs_{i}", ALICE if i % 2 == 0 else BOB, created_at=100 + i)
    stores, kernel = service(store)
    with acting_as(ALICE):
        page = await stores.list(None, 2, "desc")
        assert ([s.id for s in page.data], page.has_more) == (["vs_4", "vs_2"], True)
        kernel.reset()
        rest = await stores.list("vs_2", 5, "desc")
        assert ([s.id for s in rest.data], rest.has_more) == (["vs_0"], False)
        assert kernel.round_trips == 1  # the cursor is read with the page
        with pytest.raises(NotFoundError):
            await stores.list("vs_1", 5, "asc")  # another's store is no cursor
    with acting_as(None):
        assert [s.id for s in (await stores.list(None, 10, "asc")).data] == [f"vs_{i}" for i in range(6)]


async def test_another_callers_store_and_all_of_it_look_missing(store: Store) -> None:
    await make(store, "vs_a", ALICE)
    stores, _ = service(store)
    with acting_as(CAROL):
        calls = [
            stores.get("vs_a"),
            stores.list_files("vs_a", None, 10, "asc"),
            stores.get_file("vs_a", "file_a"),
            stores.file_content("vs_a", "file_a"),
            stores.delete_file("vs_a", "file_a"),
            stores.update("vs_a", UpdateVectorStoreRequest(name="mine")),
            stores.attach("vs_a", AttachFileRequest(file_id="file_b")),
            stores.delete("vs_a"),
        ]
        for call in calls:
            with pytest.raises(NotFoundError):
                await call
    with acting_as(ALICE):
        assert (await stores.get("vs_a")).name == "s"
        assert [f.id for f in (await stores.list_files("vs_a", None, 10, "asc")).data] == ["file_a"]


async def test_a_team_reads_a_store_its_owner_alone_changes(store: Store) -> None:
    await make(store, "vs_a", ALICE)
    stores, _ = service(store, TEAM_READS)
    with acting_as(BOB):
        assert (await stores.get("vs_a")).id == "vs_a"
        assert [s.id for s in (await stores.list(None, 10, "asc")).data] == ["vs_a"]
        with pytest.raises(ForbiddenError):
            await stores.update("vs_a", UpdateVectorStoreRequest(name="bob's"))
        with pytest.raises(ForbiddenError):
            await stores.delete("vs_a")
    with acting_as(CAROL):
        assert (await stores.list(None, 10, "asc")).data == []
    with acting_as(ALICE):
        assert (await stores.update("vs_a", UpdateVectorStoreRequest(name="renamed"))).name == "renamed"
        await stores.delete("vs_a")
        with pytest.raises(NotFoundError):
            await stores.get("vs_a")
    assert await store.all_vector_store_files("vs_a") == []


async def test_a_create_refused_on_one_side_leaves_nothing_of_its_own(store: Store) -> None:
    # The record and the index of one id disagree only after a lost write; a create must not take the half
    # that is there, nor leave its own half beside it.
    await make(store, "vs_index", ALICE)
    await store.kernel.write([ops.Delete(VECTOR_STORE, "vs_index")])  # an index left without its record
    await make(store, "vs_record", ALICE)
    await store.delete_vector_store("vs_record")
    await store.kernel.write([vector_stores(store.kernel).put(a_record("vs_record"), owner=owner_of(ALICE))])
    for store_id in ("vs_index", "vs_record"):
        with pytest.raises(ConflictError):
            await make(store, store_id, BOB, file_id="file_bob")
    assert await vector_stores(store.kernel).find("vs_index") is None
    assert "file_bob" not in [f.file_id for f in await store.all_vector_store_files("vs_index")]
    kept = await vector_stores(store.kernel).find("vs_record")
    assert kept is not None and kept.rec.owner == owner_of(ALICE)
    assert await store.all_vector_store_files("vs_record") == []


async def test_an_update_is_checked_on_the_record_it_writes(store: Store) -> None:
    await make(store, "vs_z", ALICE)
    stores, _ = service(store)
    read = stores.records.find

    async def then_made_again(record_id: str, **query: Any) -> Any:
        found = await read(record_id, **query)
        # Between the update's read and its write, the store is deleted and Bob makes one under its id.
        await store.delete_vector_store("vs_z")
        await make(store, "vs_z", BOB)
        return found

    stores.records.find = then_made_again  # type: ignore[method-assign]
    with acting_as(ALICE), pytest.raises(NotFoundError):
        await stores.update("vs_z", UpdateVectorStoreRequest(name="alice's"))
    assert (await vector_stores(store.kernel).get("vs_z")).name == "s"
