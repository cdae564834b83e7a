"""Ranking: reciprocal-rank fusion of ranked lists, and the scores a search reports, all in [0, 1].

How each mode's score is made comparable (and ``score_threshold`` meaningful):

* vector: cosine similarity ``c`` in [-1, 1] becomes ``(c + 1) / 2``;
* keyword: backends rank by BM25 or the database's full-text rank, whose scales
  differ, so the score is rank-based: ``(K + 1) / (K + rank)`` (the first hit is 1);
* hybrid: reciprocal-rank fusion, ``sum(1 / (K + rank))`` over the lists a chunk is
  in, divided by its largest possible value ``lists / (K + 1)`` (first in every list is 1).

``K`` is 60, the constant of Cormack et al.'s paper and common practice.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

RRF_K = 60

T = TypeVar("T", bound=Hashable)


def cosine_score(similarity: float) -> float:
    """A cosine similarity as a score in [0, 1]."""
    return min(1.0, max(0.0, (similarity + 1.0) / 2.0))


def rank_scores(ranked: Sequence[T]) -> dict[T, float]:
    """Rank-based scores of one ranked list (best first): the first is 1."""
    return {key: (RRF_K + 1) / (RRF_K + rank) for rank, key in enumerate(ranked, start=1)}


def reciprocal_rank_fusion(lists: Sequence[Sequence[T]]) -> dict[T, float]:
    """Fuse ranked lists (best first) into one score per key in [0, 1]; empty lists count towards the maximum."""
    if not lists:
        return {}
    fused: dict[T, float] = {}
    for ranked in lists:
        for rank, key in enumerate(ranked, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (RRF_K + rank)
    best = len(lists) / (RRF_K + 1)
    return {key: min(1.0, score / best) for key, score in fused.items()}
