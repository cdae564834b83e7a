"""Scores in [0, 1]: cosine mapped, rank-based keyword scores, and reciprocal-rank fusion."""

from __future__ import annotations

import pytest

from ferryman.knowledge.fusion import RRF_K, cosine_score, rank_scores, reciprocal_rank_fusion


@pytest.mark.parametrize(("similarity", "score"), [(1.0, 1.0), (0.0, 0.5), (-1.0, 0.0), (1.0000001, 1.0), (-1.2, 0.0)])
def test_cosine_similarity_becomes_a_score_in_range(similarity: float, score: float) -> None:
    assert cosine_score(similarity) == pytest.approx(score)


def test_rank_scores_start_at_one_and_fall() -> None:
    scores = rank_scores(["a", "b", "c"])
    assert scores["a"] == 1.0
    assert scores["a"] > scores["b"] > scores["c"] > 0
    assert scores["b"] == pytest.approx((RRF_K + 1) / (RRF_K + 2))
    assert rank_scores([]) == {}


def test_first_in_every_list_scores_one_and_agreement_wins() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["a", "c", "d"]])
    assert fused["a"] == pytest.approx(1.0)
    assert fused["c"] > fused["b"]  # in both lists beats second in one
    assert fused["c"] > fused["d"]
    assert all(0.0 < score <= 1.0 for score in fused.values())
    assert set(fused) == {"a", "b", "c", "d"}


def test_an_empty_list_still_counts_towards_the_maximum() -> None:
    fused = reciprocal_rank_fusion([["a"], []])
    assert fused == {"a": pytest.approx(0.5)}
    assert reciprocal_rank_fusion([]) == {}
    assert reciprocal_rank_fusion([["x", "y"]]) == pytest.approx(rank_scores(["x", "y"]))
