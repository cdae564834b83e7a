"""Listing vector stores through the owned store: only the caller's, paged honestly (files: test_files_on_kernel)."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_backends import sqlite_store

from ferryman.auth.principal import Principal, PrincipalKind, current_principal
from ferryman.errors import NotFoundError
from ferryman.services.owned_store import owned
from ferryman.storage.knowledge import VectorStoreRecord

pytestmark = pytest.mark.anyio

ALICE, BOB = Principal(PrincipalKind.SUBJECT, "alice"), Principal(PrincipalKind.SUBJECT, "bob")


async def test_each_caller_pages_through_its_own_vector_stores(tmp_path: Path) -> None:
    async with sqlite_store(tmp_path) as inner:
        store = owned(inner)
        for i in range(6):
            token = current_principal.set(ALICE if i % 2 == 0 else BOB)
            try:
                await store.create_vector_store(VectorStoreRecord(f"vs_{i}", "s", 100 + i, "m", 3), [])
            finally:
                current_principal.reset(token)
        token = current_principal.set(ALICE)
        try:
            stores = await store.list_vector_stores(None, 5, "desc")
            assert ([v.vector_store_id for v in stores.items], stores.has_more) == (["vs_4", "vs_2", "vs_0"], False)
            with pytest.raises(NotFoundError):
                await store.list_vector_stores("vs_1", 5, "asc")
        finally:
            current_principal.reset(token)
        everyone = await store.list_vector_stores(None, 10, "asc")
        assert len(everyone.items) == 6
