"""What a replica keeps of sessions' histories: copies per reader, bounded, stale under another epoch."""

from __future__ import annotations

from ferryman.api.content import Message, UserMessage
from ferryman.storage.history_cache import HistoryCache, Kept


def _kept(epoch: int, *turns: tuple[int, str]) -> Kept:
    """What was read under ``epoch``: a message of each ``(order, text)``, in order."""
    kept = Kept(epoch)
    kept.add([(order, UserMessage(content=text)) for order, text in turns])
    return kept


def _texts(messages: list[Message]) -> list[str]:
    return [str(message.content) for message in messages]


def test_what_is_kept_under_another_epoch_is_nothing() -> None:
    cache = HistoryCache()
    cache.keep("s", _kept(3, (1, "a")))
    assert _texts(cache.known("s", 3).messages) == ["a"]
    assert cache.known("s", 4).messages == [] and cache.known("s", 4).epoch == 4
    assert cache.kept("t").epoch == -1


def test_a_reader_extends_its_own_copy_and_turns_a_racing_reader_added_are_not_added_twice() -> None:
    cache = HistoryCache()
    cache.keep("s", _kept(0, (1, "a")))
    mine, theirs = cache.known("s", 0), cache.known("s", 0)
    theirs.add([(2, UserMessage(content="b"))])
    cache.keep("s", theirs)
    assert cache.known("s", 0).after == 2 and mine.after == 1  # a copy: untouched by the other reader
    mine.add([(2, UserMessage(content="b")), (3, UserMessage(content="c"))])
    mine.add([(3, UserMessage(content="c"))])
    assert (mine.orders, _texts(mine.messages)) == ([1, 2, 3], ["a", "b", "c"])


def test_the_sessions_kept_longest_ago_go_first_once_too_many_messages_are_kept() -> None:
    cache = HistoryCache(max_messages=4, max_sessions=10)
    for session in ("s1", "s2", "s3"):
        cache.keep(session, _kept(0, (1, "x"), (1, "y")))
    assert [cache.kept(s).epoch for s in ("s1", "s2", "s3")] == [-1, 0, 0]
    cache.keep("s2", cache.known("s2", 0))  # kept again: the youngest now
    cache.keep("s4", _kept(0, (1, "z")))
    assert [cache.kept(s).epoch for s in ("s2", "s3", "s4")] == [0, -1, 0]


def test_the_sessions_kept_are_bounded_in_number_too() -> None:
    cache = HistoryCache(max_sessions=2)
    for session in ("s1", "s2", "s3"):
        cache.keep(session, Kept(0))
    assert [cache.kept(s).epoch for s in ("s1", "s2", "s3")] == [-1, 0, 0]


def test_the_history_before_a_turn_is_the_whole_turns_started_before_it() -> None:
    kept = _kept(0, (1, "a"), (1, "a!"), (3, "c"), (5, "e"))
    assert (kept.orders, kept.starts) == ([1, 3, 5], [0, 2, 3])
    assert _texts(kept.before(2)) == ["a", "a!"]
    assert _texts(kept.before(3)) == ["a", "a!"]
    assert _texts(kept.before(4)) == ["a", "a!", "c"]
    assert _texts(kept.before(1)) == []
    assert _texts(kept.before(None)) == _texts(kept.before(9)) == ["a", "a!", "c", "e"]
    kept.before(None).append(UserMessage(content="own"))
    assert len(kept.messages) == 4  # a new list each time
