"""A deterministic query rewrite: what OpenAI's ``rewrite_query`` asks for, without a model.

The natural-language query becomes its content words: lower-cased, question
words and common English stop words dropped, quoted phrases kept whole (with
their quotes). A query made only of stop words is kept as it was (lower-cased),
so a rewrite never empties it.
"""

from __future__ import annotations

import re

STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below between both
    but by can could did do does doing down during each few for from further had has have having he her here hers
    herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were what when where which
    while who whom whose why will with would you your yours yourself yourselves please tell explain describe find
    show give know
    """.split()
)
_TOKEN = re.compile(r'"([^"]+)"|([\w][\w\-\.\']*)')


def rewrite_query(query: str) -> str:
    """The query's content words and quoted phrases, in order."""
    kept: list[str] = []
    for match in _TOKEN.finditer(query):
        phrase, word = match.groups()
        if phrase is not None:
            kept.append(f'"{phrase.strip().lower()}"')
        elif word.lower().strip(".'") not in STOP_WORDS:
            kept.append(word.lower().rstrip(".'"))
    rewritten = " ".join(part for part in kept if part)
    return rewritten or " ".join(query.lower().split())
