"""The words and terms keyword search indexes: the fast ASCII split finds what the regex finds."""

from __future__ import annotations

import random
import re

import pytest

from ferryman.storage.search import keyword_terms
from ferryman.storage.search.keyword_terms import NOT_INDEXED, TermIds, terms, words

# Every ASCII character (controls and the separators str.split treats as spaces, \x1c-\x1f, included), and
# non-ASCII letters, digits, spaces and symbols, some of which lowercase to ASCII (the Kelvin sign) or to more than
# one character (dotted capital I).
_CHARACTERS = [chr(c) for c in range(128)] + list("éÉßİKΣσ東京٣²\u00a0\u2003\u2028—’🚢_")


def test_words_are_what_the_word_regex_finds_in_the_lowercased_text() -> None:
    rng = random.Random(17)
    texts = ["Where do the DOGS run, and what about running?", "snake_case and CamelCase 42x", "Café naïve Kelvin"]
    texts += ["".join(rng.choices(_CHARACTERS, k=rng.randint(0, 60))) for _ in range(3000)]
    texts += ["".join(rng.choices(_CHARACTERS[:128], k=rng.randint(0, 60))) for _ in range(3000)]
    for text in texts:
        assert words(text) == re.findall(r"\w+", text.lower()), repr(text)


def test_terms_drop_stop_words_and_stem_non_ascii_words_too() -> None:
    assert terms("The café's DOGS, naïvely running") == ["café", "dog", "naïv", "run"]


def test_term_ids_stem_each_word_once_and_mark_stop_words() -> None:
    stemmed: list[str] = []
    known: dict[str, int] = {}

    def term_id(term: str) -> int:
        stemmed.append(term)
        return known.setdefault(term, len(known))

    ids = TermIds(term_id)
    assert ids.of(["dogs", "the", "dog", "dogs"]).tolist() == [known["dog"], NOT_INDEXED, known["dog"], known["dog"]]
    assert ids.of(["dog", "running", "and"]).tolist() == [known["dog"], known["run"], NOT_INDEXED]
    assert sorted(stemmed) == ["dog", "dog", "run"]
    assert ids.of([]).tolist() == []


def test_term_ids_start_again_past_their_bound_with_the_same_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keyword_terms, "_MAX_CACHED_WORDS", 2)
    known: dict[str, int] = {}
    ids = TermIds(lambda term: known.setdefault(term, len(known)))
    first = ids.of(["harbour", "lights", "seals", "of"]).tolist()
    assert ids.of(["seals", "harbour", "tides"]).tolist() == [first[2], first[0], known["tide"]]
