"""The terms keyword search indexes and asks for: lowercased words less English stop words, stemmed.

Words are runs of ``\\w`` (Unicode letters, digits and ``_``) of the lowercased
text. English stop words are dropped (NLTK's list, which holds a question's own
words: "what", "how", "does") and the rest stemmed with the Snowball English
stemmer, as PostgreSQL's ``english`` text search does, so a natural-language
question matches a chunk's inflections ("dogs" finds "dog").

Indexing a store reads every word of every chunk, so it is the hot path of a
replica's first keyword search: :func:`words` splits ASCII text with a byte
table (twice as fast as the regex, with the same words), and :class:`TermIds`
stems each distinct word once per build, not once per occurrence.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import repeat

import numpy as np
import numpy.typing as npt
import Stemmer

STOP_WORDS = frozenset(
    """
a about above after again against ain all am an and any are aren aren't as at be because been before being below
between both but by can couldn couldn't d did didn didn't do does doesn doesn't doing don don't down during each
few for from further had hadn hadn't has hasn hasn't have haven haven't having he her here hers herself him
himself his how i if in into is isn isn't it it's its itself just ll m ma me mightn mightn't more most mustn
mustn't my myself needn needn't no nor not now o of off on once only or other our ours ourselves out over own re
s same shan shan't she she's should should've shouldn shouldn't so some such t than that that'll the their
theirs them themselves then there these they this those through to too under until up ve very was wasn wasn't we
were weren weren't what when where which while who whom why will with won won't wouldn wouldn't y you you'd
you'll you're you've your yours yourself yourselves
""".split()
)
"""NLTK's English stop words, as ``bm25s`` lists them (held here: importing ``bm25s`` costs 13 MB of RSS)."""

NOT_INDEXED = -1
"""The term id of a stop word."""
_UNSEEN = -2

_WORD = re.compile(r"\w+")
_ASCII_WORD_BYTES = bytes(c if chr(c).isalnum() or chr(c) == "_" else ord(" ") for c in range(128)) + b" " * 128
"""Keeps the bytes ``\\w`` matches in ASCII text and turns every other byte into a space."""
_STEMMER = Stemmer.Stemmer("english")
_MAX_CACHED_WORDS = 1 << 18
"""Distinct words :class:`TermIds` remembers before it starts again (about 30 MB at most on a huge vocabulary)."""


def words(text: str) -> list[str]:
    """The lowercased words of a text, stop words included: what ``\\w+`` finds in ``text.lower()``."""
    lowered = text.lower()
    if lowered.isascii():
        return lowered.encode().translate(_ASCII_WORD_BYTES).decode().split()
    return _WORD.findall(lowered)


def terms(text: str) -> list[str]:
    """The search terms of a text: its lowercased words less stop words, stemmed."""
    return list(_STEMMER.stemWords([word for word in words(text) if word not in STOP_WORDS]))


class TermIds:
    """The term ids of words, each distinct word stemmed once for as long as the instance lives.

    Args:
        term_id: The id of a stemmed term (made when new).
    """

    def __init__(self, term_id: Callable[[str], int]) -> None:
        self._term_id = term_id
        self._ids: dict[str, int] = {}

    def of(self, found: list[str]) -> npt.NDArray[np.int64]:
        """The term id of each word (:data:`NOT_INDEXED` for a stop word), in order."""
        if len(self._ids) > _MAX_CACHED_WORDS:
            self._ids.clear()
        ids = self._ids
        # One lookup per word; only the words seen for the first time take a second pass.
        found_ids = np.fromiter(map(ids.get, found, repeat(_UNSEEN)), dtype=np.int64, count=len(found))
        unseen = np.flatnonzero(found_ids == _UNSEEN).tolist()
        if unseen:
            self._learn({found[i] for i in unseen})
            found_ids[unseen] = [ids[found[i]] for i in unseen]
        return found_ids

    def _learn(self, new: set[str]) -> None:
        kept = [word for word in new if word not in STOP_WORDS]
        self._ids.update(dict.fromkeys(new, NOT_INDEXED))
        self._ids.update(zip(kept, map(self._term_id, _STEMMER.stemWords(kept)), strict=True))
