"""Keyword search in process: BM25 over a vector store's chunks, indexed once per version.

The companion of :mod:`.vector_cache` for backends without a full-text index
(Redis without modules): the store's chunk texts are tokenised and indexed by
``bm25s`` (k1 = 1.2, b = 0.75) when its *version* has moved, then every query
is one sparse scoring pass. Words are lowercased, English stop words dropped
(NLTK's list, which holds a question's own words: "what", "how", "does") and
the rest stemmed with the Snowball English stemmer, as PostgreSQL's
``english`` text search does, so a natural-language question matches a
chunk's inflections ("dogs" finds "dog").
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN_PLUS
from cachetools import LRUCache

from .vector_cache import best_first

_WORD = re.compile(r"\w+")
_STOP_WORDS = frozenset(STOPWORDS_EN_PLUS)
_STEMMER = Stemmer.Stemmer("english")


def terms(text: str) -> list[str]:
    """The search terms of a text: its lowercased words less stop words, stemmed."""
    return list(_STEMMER.stemWords([word for word in _WORD.findall(text.lower()) if word not in _STOP_WORDS]))


@dataclass(frozen=True)
class KeywordRows:
    """What a backend loads for one store: chunk ids, their file ids, and their texts."""

    chunk_ids: list[str]
    file_ids: list[str]
    texts: list[str]


@dataclass(frozen=True)
class _Index:
    version: int
    chunk_ids: list[str]
    file_ids: np.ndarray
    bm25: bm25s.BM25 | None
    """None when no chunk has a single term."""


Loader = Callable[[], Awaitable[KeywordRows]]


class KeywordCache:
    """The BM25 indexes of the most recently searched stores.

    Args:
        max_stores: How many stores' indexes stay in memory.
    """

    def __init__(self, max_stores: int = 32) -> None:
        self._indexes: LRUCache[str, _Index] = LRUCache(maxsize=max_stores)

    async def best(
        self,
        vector_store_id: str,
        version: int,
        load: Loader,
        query: str,
        file_ids: list[str] | None,
        limit: int,
    ) -> list[tuple[str, float]]:
        """``(chunk_id, BM25 score)`` of the ``limit`` best chunks for ``query`` (those with a score), best first."""
        words = terms(query)
        if not words or limit <= 0:
            return []
        index = self._indexes.get(vector_store_id)
        if index is None or index.version != version:
            # Tokenising a large store takes a while: off the event loop.
            index = await asyncio.to_thread(_build, version, await load())
            self._indexes[vector_store_id] = index
        if index.bm25 is None:
            return []
        known = [word for word in words if word in index.bm25.vocab_dict]
        if not known:
            return []
        scores = index.bm25.get_scores(known)
        if file_ids is not None:
            scores = np.where(np.isin(index.file_ids, file_ids), scores, 0.0)
        return [(index.chunk_ids[i], float(scores[i])) for i in best_first(scores, limit) if scores[i] > 0]

    def forget(self, vector_store_id: str) -> None:
        """Drop a store's index (it was deleted)."""
        self._indexes.pop(vector_store_id, None)


def _build(version: int, rows: KeywordRows) -> _Index:
    corpus = [terms(text) for text in rows.texts]
    file_ids = np.asarray(rows.file_ids, dtype=object)
    if not any(corpus):
        return _Index(version, rows.chunk_ids, file_ids, None)
    bm25 = bm25s.BM25(k1=1.2, b=0.75)
    bm25.index(corpus, show_progress=False)
    return _Index(version, rows.chunk_ids, file_ids, bm25)
