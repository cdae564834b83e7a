"""Keyword search over chunks, per database: SQLite's FTS5 with BM25, PostgreSQL's full-text search.

A user's query is never handed to the database's query syntax as it is (a stray
quote or ``AND`` would be an error or an operator): it is cut into words, and
the words are OR-ed, so a question still finds chunks that share only some of
its words; the rank puts those sharing more (and rarer) words first.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+")

CHUNK_COLUMNS = "c.chunk_id, c.vector_store_id, c.file_id, c.position, c.text, c.embedding, c.token_count, c.metadata"
"""A chunk's columns, in the order :func:`ferryman.storage.sql.chunks.chunk_record` reads them."""


def words(query: str) -> list[str]:
    """The words of a query, lower-cased, each once, in order."""
    return list(dict.fromkeys(word.lower() for word in _WORD.findall(query)))


class Fts5Keywords:
    """SQLite: an FTS5 table over ``chunks`` (``chunks_fts``), ranked by ``bm25()``."""

    def match(self, terms: list[str]) -> str:
        """An FTS5 query: each word quoted as a string (words hold no quote), OR-ed."""
        return " OR ".join(f'"{term}"' for term in terms)

    def search(self, condition: str) -> str:
        """Chunks of ``:vector_store_id`` matching ``:query`` (and ``condition``), best first, ``:limit`` of them."""
        # bm25() is lower for better matches: its negation is the score.
        return (
            f"SELECT {CHUNK_COLUMNS}, -bm25(chunks_fts) AS score FROM chunks_fts "  # noqa: S608
            "JOIN chunks c ON c.id = chunks_fts.rowid "
            f"WHERE chunks_fts MATCH :query AND c.vector_store_id = :vector_store_id{condition} "
            "ORDER BY score DESC, c.id LIMIT :limit"
        )


def split_codes(sql: str) -> str:
    """SQL normalising the text ``sql`` evaluates to before PostgreSQL parses it into words.

    The parser reads ``IT-309`` as the word ``it`` and the negative number
    ``-309``, which a query for ``309`` never matches. A hyphen between a word
    character and a digit becomes a space: ``it`` and ``309``. The generated
    ``chunks.text_search`` column (migration 0006) applies the same expression.
    """
    return rf"regexp_replace({sql}, '(\w)-(?=\d)', '\1 ', 'g')"


def tsvector(sql: str) -> str:
    """The English ``tsvector`` of text with codes split, as ``chunks.text_search`` holds it."""
    return f"to_tsvector('english', {split_codes(sql)})"


_ONE_LEXEME = r"CAST('''' || replace(replace(t.lexeme, '\', '\\'), '''', '\''') || '''' AS tsquery)"
"""A lexeme as a one-term tsquery, through tsquery's own quoting (a parser could split it again)."""


class TsvectorKeywords:
    """PostgreSQL: the generated ``text_search`` column, ranked by BM25 over its lexemes.

    PostgreSQL's own ranks know nothing of how rare a word is: a question's
    common words (``require``) outranked the one code that mattered. Each of
    the query's lexemes is weighted by its inverse document frequency (its
    count among the chunks searched, against the store's size), its count in a
    chunk saturating as BM25's does (``k1`` = 1.2; no length normalisation:
    chunks have similar lengths by construction).
    """

    def match(self, terms: list[str]) -> str:
        """The query's words, as text for :func:`tsvector` (which never fails to parse)."""
        return " ".join(terms)

    def search(self, condition: str) -> str:
        """As :meth:`Fts5Keywords.search`."""
        # Scores are summed over chunk ids alone and the columns read for the few best: grouping the
        # wide rows (text, embedding) of every matching chunk spilled to disk on a 10,000-chunk store.
        return (
            f"WITH terms AS (SELECT DISTINCT t.lexeme, {_ONE_LEXEME} AS q "  # noqa: S608
            f"FROM unnest(tsvector_to_array({tsvector(':query')})) AS t(lexeme)), "
            "matches AS (SELECT c.id, t.lexeme, ts_rank_cd(c.text_search, t.q) * 10 AS tf "
            "FROM chunks c JOIN terms t ON c.text_search @@ t.q "
            f"WHERE c.vector_store_id = :vector_store_id{condition}), "
            "df AS (SELECT lexeme, count(*)::float8 AS n FROM matches GROUP BY lexeme), "
            "total AS (SELECT count(*)::float8 AS n FROM chunks WHERE vector_store_id = :vector_store_id), "
            "scored AS (SELECT m.id, sum(ln(1 + (total.n - df.n + 0.5) / (df.n + 0.5)) * m.tf * 2.2 / (m.tf + 1.2)) "
            "AS score FROM matches m JOIN df ON df.lexeme = m.lexeme CROSS JOIN total "
            "GROUP BY m.id ORDER BY score DESC, m.id LIMIT :limit) "
            f"SELECT {CHUNK_COLUMNS}, s.score FROM scored s JOIN chunks c ON c.id = s.id ORDER BY s.score DESC, c.id"
        )
