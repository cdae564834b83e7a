"""Vector search over chunks inside the database: PostgreSQL's pgvector, exact for small stores, HNSW for large.

SQLite has no such index (Python's ``sqlite3`` cannot load extensions as
shipped) and searches in process instead (``storage/search/vector_index.py``).

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
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import UserDefinedType

from ferryman.storage.sql.dialects import Compiled, SqlDialect, p
from ferryman.storage.sql.domain_tables import CHUNK_COLUMNS, chunks, vector_stores
from ferryman.storage.sql.seam import Row, Work, first

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
_LOCK = "SELECT pg_advisory_xact_lock(:key, :dimension)"
# Named parameters, as the statements have: a '%' in a name stays single.
_PG = postgresql.psycopg2.dialect(paramstyle="named")  # type: ignore[no-untyped-call]
C = chunks.c


def _schema(name: str) -> str:
    """The extension's schema as an identifier, always in double quotes (its case and any character kept)."""
    return _PG.identifier_preparer.quote_identifier(name)


class _VectorDims(FunctionElement[int]):
    """pgvector's ``vector_dims`` of an expression, qualified with the extension's schema."""

    inherit_cache = False  # the schema is no part of SQLAlchemy's cache key (the statements are compiled directly)
    type = sa.Integer()

    def __init__(self, extension: str, of: sa.ColumnElement[Any]) -> None:
        self.extension = extension
        super().__init__(of)


@compiles(_VectorDims)
def _vector_dims(element: _VectorDims, compiler: Any, **kw: Any) -> str:
    return f"{_schema(element.extension)}.vector_dims({compiler.process(element.clauses, **kw)})"


class _Vector(UserDefinedType[Any]):
    """pgvector's ``vector`` or ``halfvec`` type in the extension's schema, of a dimension (None: any)."""

    cache_ok = True

    def __init__(self, schema: str, kind: str = "vector", dimension: int | None = None) -> None:
        self.schema, self.kind, self.dimension = schema, kind, dimension

    def get_col_spec(self, **kw: Any) -> str:
        spec = f"{_schema(self.schema)}.{self.kind}"
        return spec if self.dimension is None else f"{spec}({int(self.dimension)})"


def _number(value: int) -> sa.ColumnElement[Any]:
    """An integer written into the statement: the planner matches a partial index's predicate only to a constant."""
    return sa.literal_column(str(int(value)), sa.Integer())


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
    an iterative scan (the connection's settings: ``storage/sql/pgvector.py``), and
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
        # Its own statements' cache: those of large stores, one per store, would crowd out the others'.
        self._sql = SqlDialect("postgresql")

    def _distance(self, dimension: int | None = None) -> sa.ColumnElement[Any]:
        """The cosine distance of a chunk's embedding to ``:embedding``, over the cast to ``dimension``'s type if
        given (what the dimension's HNSW index is over)."""
        operator = f"OPERATOR({_schema(self.schema)}.<=>)"
        if dimension is None:
            return C.embedding.op(operator)(p("embedding"))
        kind = _Vector(self.schema, cast_type(dimension) or "vector", dimension)
        query = sa.cast(sa.cast(p("embedding"), _Vector(self.schema)), kind)
        return sa.cast(C.embedding, kind).op(operator)(query)

    def _dims(self) -> sa.ColumnElement[Any]:
        return _VectorDims(self.schema, C.embedding)

    def _scope(self, files: bool) -> sa.ColumnElement[bool]:
        """The store's chunks (``:vector_store_id``), of list ``:file_ids`` when ``files``."""
        store = C.vector_store_id == p("vector_store_id")
        return sa.and_(store, self._sql.one_of(C.file_id, "file_ids")) if files else store

    def create_index(self, dimension: int) -> str:
        """The statement creating the HNSW index of a dimension (one :func:`cast_type` has), if missing."""
        return self._compiled(("create", dimension), lambda: self._index(dimension)).sql

    def _index(self, dimension: int) -> sa.schema.CreateIndex:
        kind = cast_type(dimension) or "vector"
        typed = sa.cast(C.embedding, _Vector(self.schema, kind, dimension)).label("typed")
        index = sa.Index(
            index_name(dimension),
            typed,
            postgresql_using="hnsw",
            postgresql_ops={"typed": f"{_schema(self.schema)}.{kind}_cosine_ops"},
            postgresql_where=self._dims() == _number(dimension),
        )
        sa.Table("chunks", sa.MetaData(), sa.Column("embedding"), index)
        return sa.schema.CreateIndex(index, if_not_exists=True)

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
        exists = self._compiled("exists", lambda: sa.select(sa.func.to_regclass(p("index"))))
        if (yield exists.first(index=index_name(dimension)))[0] is not None:
            return
        yield first(_LOCK, key=_INDEX_LOCK, dimension=dimension)
        if (yield exists.first(index=index_name(dimension)))[0] is None:
            yield first(self.create_index(dimension))

    def _compiled(self, key: Any, build: Callable[[], Any]) -> Compiled:
        return self._sql.compiled((self.schema, key), build)

    def exact(self, files: bool) -> Compiled:
        """Chunks of ``:vector_store_id`` nearest ``:embedding`` (of ``:dimension``), best first, ``:limit`` of them.

        The score is the cosine similarity, ``1 -`` the cosine distance;
        ``files``: of the files of list ``:file_ids`` only. Chunks of another
        dimension are left out (pgvector would fail on them).
        """

        def build() -> sa.Select[Any]:
            score: sa.Label[Any] = (sa.literal_column("1") - self._distance()).label("score")
            # Ordered by the score itself: ordering by the distance would compute it twice a row.
            return (
                sa.select(*CHUNK_COLUMNS, score)
                .where(self._scope(files), self._dims() == p("dimension"))
                .order_by(score.desc(), C.id)
                .limit(p("limit"))
            )

        return self._compiled(("exact", files), build)

    def approximate(self, files: bool, dimension: int, vector_store_id: str) -> Compiled:
        """As :meth:`exact`, through the dimension's HNSW index, the ``:limit`` rows re-sorted by their exact score.

        The dimension is written into the statement: the planner matches the
        cast and the filter to the index's expression and predicate. So is the
        store (when its id is plain): a prepared statement may be planned once
        for any parameters, and that plan, made for a store of average size
        among many small ones, scans the store's rows exactly.
        """
        plain = _PLAIN.fullmatch(vector_store_id) is not None

        def build() -> sa.Select[Any]:
            literal = sa.String().literal_processor(_PG)  # type: ignore[no-untyped-call]
            store = (
                sa.literal_column(literal(vector_store_id)) if plain and literal is not None else p("vector_store_id")
            )
            score: sa.Label[Any] = (sa.literal_column("1") - self._distance()).label("score")
            near = (
                sa.select(*CHUNK_COLUMNS, C.id, score)
                .where(C.vector_store_id == store, self._dims() == _number(dimension))
                .order_by(self._distance(dimension))
                .limit(p("limit"))
            )
            if files:
                near = near.where(self._sql.one_of(C.file_id, "file_ids"))
            n = near.subquery("n")
            return sa.select(*(n.c[column.name] for column in CHUNK_COLUMNS), n.c.score).order_by(
                n.c.score.desc(), n.c.id
            )

        return self._compiled(("approximate", files, dimension, vector_store_id if plain else ""), build)

    def scope(self, files: bool) -> Compiled:
        """How many chunks of ``:vector_store_id`` (of list ``:file_ids`` when ``files``) there are, up to
        ``:enough``, and the store's dimension."""

        def build() -> sa.Select[Any]:
            few = sa.select(sa.literal_column("1")).where(self._scope(files)).limit(p("enough")).subquery("n")
            counted = sa.select(sa.func.count()).select_from(few).scalar_subquery()
            V = vector_stores.c
            dimension = (
                sa.select(V.embedding_dimension).where(V.vector_store_id == p("vector_store_id")).scalar_subquery()
            )
            return sa.select(counted, dimension)

        return self._compiled(("scope", files), build)

    def nearest(self, file_ids: list[str] | None, dimension: int, params: dict[str, Any]) -> Work[list[Row]]:
        """The rows of :meth:`exact` (``:dimension`` is given here), through the HNSW index when the store is large.

        Args:
            file_ids: Search these files only; None: all the store's.
            dimension: The query's dimension.
            params: ``vector_store_id``, ``embedding`` and ``limit``.
        """
        params = {**params, "dimension": dimension}
        files = file_ids is not None
        if file_ids is not None:
            params["file_ids"] = self._sql.array(file_ids)
        if self._iterative is None:
            version: Row | None = yield first(_ITERATIVE)
            self._iterative = version is not None and bool(version[0])
        if self._iterative and cast_type(dimension) is not None:
            near = yield from self._approximate(files, dimension, params)
            if near is not None:
                return near
        exact: list[Row] = yield self.exact(files).rows(**params)
        return exact

    def _approximate(self, files: bool, dimension: int, params: dict[str, Any]) -> Work[list[Row] | None]:
        """The rows through the HNSW index, or None when the search is to be exact."""
        key = (str(params["vector_store_id"]), dimension)
        if files or self._large.get(key, 0.0) < time.monotonic():
            self._large.pop(key, None)
            enough = max(self.approximate_from, int(params["limit"]))
            found, stored = yield self.scope(files).first(enough=enough, **params)
            if found < enough or stored != dimension:
                return None
            if not files:
                self._large[key] = time.monotonic() + LARGE_FOR
                while len(self._large) > LARGE_KEPT:
                    del self._large[next(iter(self._large))]
        near: list[Row] = yield self.approximate(files, dimension, key[0]).rows(**params)
        if len(near) < int(params["limit"]):
            self._large.pop(key, None)
            return None
        return near
