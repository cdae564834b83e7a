"""Vector search over chunks inside the database: PostgreSQL's pgvector.

SQLite has no such index (Python's ``sqlite3`` cannot load extensions as
shipped) and searches in process instead (``storage/vector_cache.py``).
"""

from __future__ import annotations

from .keywords import CHUNK_COLUMNS


def quoted(identifier: str) -> str:
    """A SQL identifier in double quotes."""
    return '"' + identifier.replace('"', '""') + '"'


class PgvectorIndex:
    """pgvector's cosine distance (``<=>``) over the untyped ``vector`` column ``chunks.embedding``.

    The search is exact: a scan of the store's chunks (the ``chunks_of_file``
    index narrows it to them). There is no HNSW or IVFFlat index because such
    an index needs a column of one dimension and stores differ in dimension
    (their embedding models do); an exact scan over one store's chunks stays
    fast for the stores of this service.

    Args:
        schema: The schema the extension lives in (its operators are qualified: it need not be on the search path).
    """

    def __init__(self, schema: str) -> None:
        self.schema = schema

    def nearest(self, condition: str) -> str:
        """Chunks of ``:vector_store_id`` nearest ``:embedding`` (of ``:dimension``), best first, ``:limit`` of them.

        The score is the cosine similarity, ``1 -`` the cosine distance;
        ``condition`` is added to the ``WHERE``. Chunks of another dimension
        are left out (pgvector would fail on them).
        """
        schema = quoted(self.schema)
        distance = f"c.embedding OPERATOR({schema}.<=>) :embedding"
        return (
            f"SELECT {CHUNK_COLUMNS}, 1 - ({distance}) AS score FROM chunks c "  # noqa: S608
            f"WHERE c.vector_store_id = :vector_store_id AND {schema}.vector_dims(c.embedding) = :dimension"
            # Ordered by the score itself: ordering by the distance would compute it twice a row.
            f"{condition} ORDER BY score DESC, c.id LIMIT :limit"
        )
