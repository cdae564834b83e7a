"""Vector search over chunks inside the database: PostgreSQL's pgvector, exact for small stores, HNSW for large.

SQLite has no such index (Python's ``sqlite3`` cannot load extensions as
shipped) and searches in process instead (``storage/vector_index.py``).

``chunks.embedding`` is an untyped ``vector`` (stores differ in dimension), and
an HNSW index needs a typed one, so each dimension has its own partial index on
a cast of the column, named by :func:`index_name`::

    CREATE INDEX chunks_embedding_384 ON chunks
        USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE vector_dims(embedding) = 384

A query that filters on ``vector_dims(embedding) = 384`` and orders by the same
cast's distance is answered from it. HNSW takes ``vector`` up to 2,000
dimensions; from 2,001 to 4,000 the index is over a ``halfvec`` cast (the order
is approximate anyway: scores are the full-precision ones, and the rows are
re-sorted by them); above 4,000 search stays exact.

Migration ``0017_vector_indexes`` made the indexes of the dimensions stores had;
a store of a new dimension makes its own in the transaction that creates the
store (:meth:`PgvectorIndex.prepare`).
"""

from __future__ import annotations

import re
import time
from typing import Any

from .chunk_columns import CHUNK_COLUMNS
from .seam import Row, Work, first, rows

APPROXIMATE_FROM = 5_000
"""A store (or the files searched) with fewer chunks is searched exactly: an HNSW scan filtered to a small part of
the table would walk far (``hnsw.max_scan_tuples``) to find its few rows, and an exact scan of them is cheap
(about 2 µs a chunk)."""

HNSW_LIMITS = {"vector": 2_000, "halfvec": 4_000}
"""The most dimensions pgvector's HNSW indexes, by the type of the cast."""

LARGE_KEPT = 1_024
"""How many stores a process remembers as large (their searches skip the count)."""

LARGE_FOR = 60.0
"""For how many seconds: a store that shrank since is counted again then (or at once, if it has too few chunks
left to fill a search)."""

_PLAIN = re.compile(r"[\w.-]{1,200}", re.ASCII)
"""A store id written into the statement as a literal: no quote, and no colon (the driver's ``:name``)."""
_INDEX_LOCK = 0x66657276  # "ferv" (migrations take "ferr"); the second key is the dimension
_ITERATIVE = "SELECT string_to_array(extversion, '.')::int[] >= '{0,8}' FROM pg_extension WHERE extname = 'vector'"


def quoted(identifier: str) -> str:
    """A SQL identifier in double quotes."""
    return '"' + identifier.replace('"', '""') + '"'


def cast_type(dimension: int) -> str | None:
    """The type an HNSW index of this dimension is over (``vector`` or ``halfvec``), None if none can be."""
    return next((kind for kind, most in HNSW_LIMITS.items() if 0 < dimension <= most), None)


def index_name(dimension: int) -> str:
    """The name of the HNSW index of chunks of this dimension (in the chunks' schema)."""
    return f"chunks_embedding_{dimension}"


class PgvectorIndex:
    """pgvector's cosine distance (``<=>``) over the untyped ``vector`` column ``chunks.embedding``.

    A search first counts the chunks it would scan, up to ``approximate_from``:
    fewer are scored exactly (the ``chunks_of_file`` index narrows the scan to
    them); as many or more are walked through their dimension's HNSW index with
    an iterative scan (the connection's settings: ``storage/pgvector.py``), and
    if that brings back fewer than asked (the scan gave up, or the store
    shrank), exactly after all. A store found large is remembered as such for
    :data:`LARGE_FOR`: its searches of all its files skip the count meanwhile.
    Before pgvector 0.8, which has no iterative scan, every search is exact.

    Args:
        schema: The schema the extension lives in (its operators are qualified: it need not be on the search path).
        approximate_from: The fewest chunks searched through the HNSW index.
    """

    def __init__(self, schema: str, approximate_from: int = APPROXIMATE_FROM) -> None:
        self.schema = schema
        self.approximate_from = approximate_from
        self._iterative: bool | None = None  # whether the extension scans iteratively, once asked
        self._large: dict[tuple[str, int], float] = {}  # (store, dimension) -> until when, oldest first

    def _distance(self, column: str, dimension: int | None = None) -> str:
        """The cosine distance of ``column`` to ``:embedding``, over the cast to ``dimension``'s type if given."""
        schema = quoted(self.schema)
        operator = f"OPERATOR({schema}.<=>)"
        if dimension is None:
            return f"{column} {operator} :embedding"
        kind = f"{schema}.{cast_type(dimension)}({dimension})"
        return f"({column})::{kind} {operator} CAST(CAST(:embedding AS {schema}.vector) AS {kind})"

    def create_index(self, dimension: int) -> str:
        """The statement creating the HNSW index of a dimension (one :func:`cast_type` has), if missing."""
        schema = quoted(self.schema)
        kind = cast_type(dimension)
        return (
            f"CREATE INDEX IF NOT EXISTS {index_name(dimension)} ON chunks USING hnsw "
            f"((embedding::{schema}.{kind}({dimension})) {schema}.{kind}_cosine_ops) "
            f"WHERE {schema}.vector_dims(embedding) = {dimension}"
        )

    def prepare(self, dimension: int) -> Work[None]:
        """Create the HNSW index of a dimension unless it exists (run in the transaction that creates a store).

        A new dimension comes with a new embedding model, rarely, and before
        any chunk has it: the build is one scan of the table, under a lock that
        holds other chunk writes (not reads) until the transaction ends. The
        replicas making the same index take turns on an advisory lock, so the
        second finds the first's. ``CONCURRENTLY`` would hold no writes, but it
        cannot run in a transaction, waits for every older snapshot in the
        database, and leaves an invalid index behind when interrupted.
        """
        if cast_type(dimension) is None:
            return
        exists = f"SELECT to_regclass('{index_name(dimension)}')"
        if (yield first(exists))[0] is not None:
            return
        yield first("SELECT pg_advisory_xact_lock(:key, :dimension)", key=_INDEX_LOCK, dimension=dimension)
        if (yield first(exists))[0] is None:
            yield first(self.create_index(dimension))

    def exact(self, condition: str) -> str:
        """Chunks of ``:vector_store_id`` nearest ``:embedding`` (of ``:dimension``), best first, ``:limit`` of them.

        The score is the cosine similarity, ``1 -`` the cosine distance;
        ``condition`` is added to the ``WHERE``. Chunks of another dimension
        are left out (pgvector would fail on them).
        """
        dims = f"{quoted(self.schema)}.vector_dims(c.embedding)"
        return (
            f"SELECT {CHUNK_COLUMNS}, 1 - ({self._distance('c.embedding')}) AS score FROM chunks c "  # noqa: S608
            f"WHERE c.vector_store_id = :vector_store_id AND {dims} = :dimension"
            # Ordered by the score itself: ordering by the distance would compute it twice a row.
            f"{condition} ORDER BY score DESC, c.id LIMIT :limit"
        )

    def approximate(self, condition: str, dimension: int, vector_store_id: str) -> str:
        """As :meth:`exact`, through the dimension's HNSW index, the ``:limit`` rows re-sorted by their exact score.

        The dimension is written into the statement: the planner matches the
        cast and the filter to the index's expression and predicate. So is the
        store (when its id is plain): a prepared statement may be planned once
        for any parameters, and that plan, made for a store of average size
        among many small ones, scans the store's rows exactly.
        """
        store = f"'{vector_store_id}'" if _PLAIN.fullmatch(vector_store_id) else ":vector_store_id"
        outer = CHUNK_COLUMNS.replace("c.", "n.")
        return (
            f"SELECT {outer}, n.score FROM (SELECT {CHUNK_COLUMNS}, c.id, "  # noqa: S608
            f"1 - ({self._distance('c.embedding')}) AS score FROM chunks c "
            f"WHERE c.vector_store_id = {store} AND {quoted(self.schema)}.vector_dims(c.embedding) = "
            f"{int(dimension)}{condition} ORDER BY {self._distance('c.embedding', dimension)} LIMIT :limit) n "
            "ORDER BY n.score DESC, n.id"
        )

    def scope(self, condition: str) -> str:
        """How many chunks of ``:vector_store_id`` (plus ``condition``) there are, up to ``:enough``, and the store's
        dimension."""
        return (
            "SELECT (SELECT count(*) FROM (SELECT 1 FROM chunks c WHERE c.vector_store_id = :vector_store_id"  # noqa: S608
            f"{condition} LIMIT :enough) n), (SELECT embedding_dimension FROM vector_stores "
            "WHERE vector_store_id = :vector_store_id)"
        )

    def nearest(self, condition: str, dimension: int, params: dict[str, Any]) -> Work[list[Row]]:
        """The rows of :meth:`exact` (``:dimension`` is given here), through the HNSW index when the store is large.

        Args:
            condition: Added to the ``WHERE`` (on ``chunks c``), empty for all the store's files.
            dimension: The query's dimension.
            params: ``vector_store_id``, ``embedding``, ``limit`` and the condition's.
        """
        params = {**params, "dimension": dimension}
        if self._iterative is None:
            version: Row | None = yield first(_ITERATIVE)
            self._iterative = version is not None and bool(version[0])
        if self._iterative and cast_type(dimension) is not None:
            near = yield from self._approximate(condition, dimension, params)
            if near is not None:
                return near
        exact: list[Row] = yield rows(self.exact(condition), **params)
        return exact

    def _approximate(self, condition: str, dimension: int, params: dict[str, Any]) -> Work[list[Row] | None]:
        """The rows through the HNSW index, or None when the search is to be exact."""
        key = (str(params["vector_store_id"]), dimension)
        if condition or self._large.get(key, 0.0) < time.monotonic():
            self._large.pop(key, None)
            enough = max(self.approximate_from, int(params["limit"]))
            found, stored = yield first(self.scope(condition), enough=enough, **params)
            if found < enough or stored != dimension:
                return None
            if not condition:
                self._large[key] = time.monotonic() + LARGE_FOR
                while len(self._large) > LARGE_KEPT:
                    del self._large[next(iter(self._large))]
        near: list[Row] = yield rows(self.approximate(condition, dimension, key[0]), **params)
        if len(near) < int(params["limit"]):
            self._large.pop(key, None)
            return None
        return near
