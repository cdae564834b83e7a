"""The deterministic query rewrite: content words, quoted phrases kept, never an empty query."""

from __future__ import annotations

import pytest

from ferryman.knowledge.rewrite import rewrite_query


@pytest.mark.parametrize(
    ("query", "rewritten"),
    [
        ("What is the toll for the ferry?", "toll ferry"),
        ("Can you tell me about Dogs?", "dogs"),
        ('Where is "Camellia Sinensis" grown?', '"camellia sinensis" grown'),
        ("How do I reset my password in v2.1?", "reset password v2.1"),
        ("the ferryman's boat", "ferryman's boat"),
        ("state-of-the-art retrieval", "state-of-the-art retrieval"),
        ("  spaced    out  ", "spaced"),
    ],
)
def test_content_words_are_kept_in_order(query: str, rewritten: str) -> None:
    assert rewrite_query(query) == rewritten


def test_a_query_of_only_stop_words_is_kept_lower_cased() -> None:
    assert rewrite_query("What is  THIS?") == "what is this?"


def test_a_rewrite_is_stable() -> None:
    once = rewrite_query("Please explain the crossing schedule")
    assert once == "crossing schedule" and rewrite_query(once) == once
