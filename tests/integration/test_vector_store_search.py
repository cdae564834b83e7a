"""Searching vector stores: modes, filters on attributes, thresholds, bounds, and bad queries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from knowledge_serving import knowledge_app, needs_model, settled, upload

pytestmark = [pytest.mark.anyio, needs_model]

DOCS = {
    "cats.txt": (b"Cats are small carnivorous mammals that purr and chase mice.", {"animal": "cat", "year": 2023}),
    "dogs.txt": (b"Dogs are loyal companions; they bark and fetch sticks.", {"animal": "dog", "year": 2024}),
    "tea.txt": (b"Green tea is brewed from the leaves of Camellia sinensis.", {"topic": "drink", "year": 2025}),
}


async def _store(http: httpx.AsyncClient) -> tuple[str, dict[str, str]]:
    ids = {}
    files = []
    for name, (data, attributes) in DOCS.items():
        ids[name] = (await upload(http, name, data))["id"]
        files.append({"file_id": ids[name], "attributes": attributes})
    store = (await http.post("/v1/vector_stores", json={"name": "kb"})).json()
    batch = await http.post(f"/v1/vector_stores/{store['id']}/file_batches", json={"files": files})
    assert batch.status_code == 200, batch.text
    return store["id"], ids


async def _search(http: httpx.AsyncClient, store_id: str, **body: Any) -> httpx.Response:
    return await http.post(f"/v1/vector_stores/{store_id}/search", json=body)


async def test_each_mode_finds_the_right_file_with_scores_in_range(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, services):
        store_id, ids = await _store(http)
        await settled(services)
        for ranker in ("auto", "default-2024-11-15", "vector", "keyword", "hybrid"):
            page = (await _search(http, store_id, query="purring mice", ranking_options={"ranker": ranker})).json()
            assert page["object"] == "vector_store.search_results.page"
            assert page["data"][0]["file_id"] == ids["cats.txt"], ranker
            assert page["data"][0]["filename"] == "cats.txt"
            assert page["data"][0]["attributes"] == {"animal": "cat", "year": 2023}
            assert page["data"][0]["content"][0]["type"] == "text"
            assert all(0.0 <= r["score"] <= 1.0 for r in page["data"])
            scores = [r["score"] for r in page["data"]]
            assert scores == sorted(scores, reverse=True)
        llama = (await _search(http, store_id, query="bark", search_mode="keyword")).json()
        assert [r["file_id"] for r in llama["data"]] == [ids["dogs.txt"]]
        both = (await _search(http, store_id, query=["tea leaves", "barking dogs"], max_num_results=2)).json()
        assert {r["file_id"] for r in both["data"]} == {ids["tea.txt"], ids["dogs.txt"]}


async def test_filters_thresholds_and_limits(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, services):
        store_id, ids = await _store(http)
        await settled(services)

        async def found(**body: Any) -> set[str]:
            answer = await _search(http, store_id, query="animals and drinks", **body)
            assert answer.status_code == 200, answer.text
            return {r["file_id"] for r in answer.json()["data"]}

        assert await found(filters={"type": "eq", "key": "animal", "value": "dog"}) == {ids["dogs.txt"]}
        assert await found(filters={"type": "gte", "key": "year", "value": 2024}) == {ids["dogs.txt"], ids["tea.txt"]}
        assert await found(filters={"type": "in", "key": "animal", "value": ["cat", "dog"]}) == {
            ids["cats.txt"],
            ids["dogs.txt"],
        }
        nested = {
            "type": "or",
            "filters": [
                {"type": "eq", "key": "topic", "value": "drink"},
                {
                    "type": "and",
                    "filters": [
                        {"type": "lt", "key": "year", "value": 2024},
                        {"type": "ne", "key": "animal", "value": "dog"},
                    ],
                },  # noqa: E501
            ],
        }
        assert await found(filters=nested) == {ids["tea.txt"], ids["cats.txt"]}
        assert await found(filters={"type": "eq", "key": "missing", "value": 1}) == set()
        assert len(await found(max_num_results=1)) == 1
        assert await found(ranking_options={"score_threshold": 1.0, "ranker": "vector"}) == set()
        rewritten = (await _search(http, store_id, query="What are the cats?", rewrite_query=True)).json()
        assert rewritten["search_query"] == ["cats"]


async def test_bad_searches_are_refused(tmp_path: Path) -> None:
    async with knowledge_app(tmp_path) as (http, services):
        store_id, _ = await _store(http)
        await settled(services)
        bad: list[dict[str, Any]] = [
            {"query": ""},
            {"query": []},
            {"query": "x", "max_num_results": 0},
            {"query": "x", "max_num_results": 51},
            {"query": "x", "ranking_options": {"ranker": "magic"}},
            {"query": "x", "ranking_options": {"score_threshold": 2}},
            {"query": "x", "filters": {"type": "eq", "key": "a"}},
            {"query": "x", "filters": {"type": "and", "filters": []}},
            {"query": "x", "filters": {"type": "xor", "key": "a", "value": 1}},
        ]
        for body in bad:
            assert (await _search(http, store_id, **body)).status_code == 400, body
        assert (await _search(http, "vs_nope", query="x")).status_code == 404
