"""A search is activity: it moves a store's ``last_active_at`` (its expiry anchor), at most once a minute."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from knowledge_serving import knowledge_app

from ferryman.knowledge.search import ACTIVITY_SECONDS
from ferryman.knowledge.views import now
from ferryman.server.app import Services
from ferryman.storage.domain.vector_stores import touched

pytestmark = pytest.mark.anyio

KEYWORD = {"query": "anything", "ranking_options": {"ranker": "keyword"}}


async def _active_at(services: Services, store_id: str, seconds_ago: int) -> None:
    await services.vector_stores.records.kernel.write([touched(store_id, now() - seconds_ago)])


async def _store(http: httpx.AsyncClient, **body: object) -> str:
    created = await http.post("/v1/vector_stores", json={"name": "s", **body})
    assert created.status_code == 200, created.text
    return str(created.json()["id"])


async def test_a_search_moves_the_expiry_of_a_store_not_active_in_the_last_minute(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, services):
        store_id = await _store(http, expires_after={"anchor": "last_active_at", "days": 1})
        await _active_at(services, store_id, 3 * ACTIVITY_SECONDS)
        before = now()
        assert (await http.post(f"/v1/vector_stores/{store_id}/search", json=KEYWORD)).status_code == 200
        store = (await http.get(f"/v1/vector_stores/{store_id}")).json()
        assert store["last_active_at"] >= before and store["expires_at"] == store["last_active_at"] + 86400


async def test_a_search_soon_after_activity_writes_nothing(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, services):
        store_id = await _store(http)
        await _active_at(services, store_id, ACTIVITY_SECONDS // 2)
        kept = (await services.vector_stores.records.get(store_id)).last_active_at
        assert (await http.post(f"/v1/vector_stores/{store_id}/search", json=KEYWORD)).status_code == 200
        assert (await services.vector_stores.records.get(store_id)).last_active_at == kept


async def test_a_search_does_not_revive_an_expired_store(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, services):
        store_id = await _store(http, expires_after={"anchor": "last_active_at", "days": 1})
        await _active_at(services, store_id, 2 * 86400)
        await http.post(f"/v1/vector_stores/{store_id}/search", json=KEYWORD)
        assert (await http.get(f"/v1/vector_stores/{store_id}")).json()["status"] == "expired"
