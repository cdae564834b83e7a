"""Deleting a response forgets every cached history whose chain runs through it, as the store's chain stops there."""

from __future__ import annotations

from ferryman.api.content import Message, UserMessage
from ferryman.services.responses.history import HistoryCache


def _history(*texts: str) -> list[Message]:
    return [UserMessage(content=text) for text in texts]


def _chain() -> HistoryCache:
    cache = HistoryCache()
    cache.put("r1", _history("one"), None)
    cache.put("r2", _history("one", "two"), "r1")
    cache.put("r3", _history("one", "two", "three"), "r2")
    cache.put("other", _history("else"), None)
    return cache


def test_deleting_a_response_drops_the_histories_that_hold_it() -> None:
    cache = _chain()
    cache.drop("r2")
    assert [cache.get(r) is None for r in ("r1", "r2", "r3", "other")] == [False, True, True, False]


def test_a_history_whose_chain_is_not_all_cached_is_dropped_on_any_delete() -> None:
    cache = _chain()
    cache.put("r9", _history("from the store", "nine"), "r8")  # r8's history came from the store
    cache.drop("other")
    assert cache.get("r9") is None and cache.get("r3") is not None


def test_an_evicted_link_makes_the_rest_of_its_chain_unknown() -> None:
    cache = HistoryCache(capacity=2)
    cache.put("r1", _history("one"), None)
    cache.put("r2", _history("one", "two"), "r1")
    cache.put("r3", _history("one", "two", "three"), "r2")  # evicts r1
    cache.drop("r1")
    assert cache.get("r3") is None and cache.get("r2") is None


def test_forgetting_everything() -> None:
    cache = _chain()
    cache.drop(None)
    assert all(cache.get(r) is None for r in ("r1", "r2", "r3", "other"))
