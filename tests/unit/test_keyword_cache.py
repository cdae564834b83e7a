"""In-process BM25 over a store's chunks: stemmed terms, one index per version, file filters."""

from __future__ import annotations

import pytest

from ferryman.storage.keyword_cache import KeywordCache, KeywordRows, terms

pytestmark = pytest.mark.anyio

ROWS = KeywordRows(
    chunk_ids=["c0", "c1", "c2"],
    file_ids=["file_a", "file_a", "file_b"],
    texts=["The dogs ran to the harbour", "A harbour ticket office", "Running trails in winter"],
)


def test_terms_are_lowercased_stemmed_words_without_stop_words() -> None:
    assert terms("Where do the DOGS run, and what about running?") == ["dog", "run", "run"]
    assert terms(" ?!* ") == []


async def test_an_index_is_built_once_per_version_and_filters_files() -> None:
    cache, loads = KeywordCache(), []

    async def load() -> KeywordRows:
        loads.append(1)
        return ROWS

    assert [c for c, _ in await cache.best("vs", 1, load, "harbour dog", None, 5)] == ["c0", "c1"]
    assert [c for c, _ in await cache.best("vs", 1, load, "runs", ["file_b"], 5)] == ["c2"]
    assert await cache.best("vs", 1, load, "unknown words", None, 5) == []
    assert await cache.best("vs", 1, load, "the", None, 5) == []
    assert len(loads) == 1
    await cache.best("vs", 2, load, "harbour", None, 5)
    cache.forget("vs")
    await cache.best("vs", 2, load, "harbour", None, 5)
    assert len(loads) == 3


async def test_a_store_without_terms_finds_nothing() -> None:
    async def load() -> KeywordRows:
        return KeywordRows(["c0"], ["f"], ["the and of"])

    assert await KeywordCache().best("vs", 1, load, "harbour", None, 5) == []
