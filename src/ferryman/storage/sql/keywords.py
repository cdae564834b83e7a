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


class TsvectorKeywords:
    """PostgreSQL: the generated ``text_search`` column (English), ranked by ``ts_rank_cd``."""

    def match(self, terms: list[str]) -> str:
        """A ``websearch_to_tsquery`` text, which never fails to parse: the words OR-ed."""
        return " or ".join(term for term in terms if term != "or")

    def search(self, condition: str) -> str:
        """As :meth:`Fts5Keywords.search`."""
        return (
            f"SELECT {CHUNK_COLUMNS}, ts_rank_cd(c.text_search, q) AS score "  # noqa: S608
            "FROM chunks c, websearch_to_tsquery('english', :query) q "
            f"WHERE c.vector_store_id = :vector_store_id AND c.text_search @@ q{condition} "
            "ORDER BY score DESC, c.id LIMIT :limit"
        )
