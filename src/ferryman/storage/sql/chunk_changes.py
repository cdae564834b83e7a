"""Versioned writes of a store's chunks, and the read of what changed since a version (the SQL chunk feed).

Every unit of work that writes a store's chunks starts by moving the store's
``version`` (:func:`moved`), stamps the chunks it inserts with the new version,
and records each file whose chunks it deletes in ``chunk_removals`` under that
version; :data:`CHANGES` reads them back for :mod:`ferryman.storage.search.chunk_feed`.

Why the version moves *first*: on PostgreSQL the ``UPDATE`` takes the store's
row lock, held until the unit commits, so the writers of one store run one
after another and commit in the order of their versions. A reader that sees
version ``v`` committed therefore sees every chunk stamped below ``v`` too: no
chunk of an older version can commit later and be missed by an index that
holds ``v``. And each later statement of the unit (READ COMMITTED takes a
snapshot per statement) sees every earlier writer's chunks, so a file's removal
deletes exactly what an index may hold of it. SQLite's one writer orders
writes by itself. Units that also write a store's attachments (or delete the
store) take its row first too, so no two units wait on each other in a cycle.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from operator import itemgetter

import sqlalchemy as sa
from sqlalchemy.sql.elements import ClauseElement

from ferryman.errors import NotFoundError
from ferryman.storage.knowledge import ChunkRecord
from ferryman.storage.search.chunk_feed import ChunkChanges, ChunkEntry, ChunkRemoval
from ferryman.storage.sql.dialects import Compiled, SqlDialect, p
from ferryman.storage.sql.domain_tables import chunk_removals, vector_stores
from ferryman.storage.sql.domain_tables import chunks as chunk_table
from ferryman.storage.sql.seam import Row, Work, count, each, first

REMOVALS_KEPT = 1_000
"""How many of a store's latest versions keep their removals.

An index further behind than this is sent the whole store instead: it was not
searched across a thousand writes of the store, and replaying that many would
cost about what loading the store again does. Bounded so, ``chunk_removals``
holds at most this many versions' rows a store.
"""

_ORDER = itemgetter(1, 6)
"""Rows of :func:`changes_query` in the order they were written: by version, then row id."""

C = chunk_table.c
# Constants are written into the statements: as parameters, PostgreSQL could not infer their types.
_MINUS_ONE: sa.ColumnElement[int] = sa.literal_column("-1", sa.Integer)
_ZERO: sa.ColumnElement[int] = sa.literal_column("0", sa.Integer)
_ONE: sa.ColumnElement[int] = sa.literal_column("1", sa.Integer)
_TWO: sa.ColumnElement[int] = sa.literal_column("2", sa.Integer)
_THREE: sa.ColumnElement[int] = sa.literal_column("3", sa.Integer)


def _files_chunks(d: SqlDialect, by: str, param: str) -> sa.ColumnElement[bool]:
    """The chunks of ``:vector_store_id`` whose column ``by`` is one of list parameter ``param``."""
    return sa.and_(C.vector_store_id == p("vector_store_id"), d.one_of(C[by], param))


def _record_removals(d: SqlDialect, *, of_chunks: bool) -> Compiled:
    """Record removals at ``:version`` of the chunks of ``:vector_store_id``: ``of_chunks``, one per chunk of list
    ``:ids``; else one per file of list ``:files`` that has chunks."""

    def build() -> sa.Insert:
        version = sa.cast(p("version"), sa.BigInteger)
        if of_chunks:
            read = sa.select(C.vector_store_id, version, C.file_id, C.chunk_id).where(
                _files_chunks(d, "chunk_id", "ids")
            )
            return sa.insert(chunk_removals).from_select(["vector_store_id", "version", "file_id", "chunk_id"], read)
        files = sa.select(C.vector_store_id, version, C.file_id).distinct().where(_files_chunks(d, "file_id", "files"))
        return sa.insert(chunk_removals).from_select(["vector_store_id", "version", "file_id"], files)

    return d.compiled(("chunks.record_removals", of_chunks), build)


def _delete_chunks(d: SqlDialect, *, of_chunks: bool) -> Compiled:
    """Delete the chunks of ``:vector_store_id``: ``of_chunks``, those of list ``:ids``; else of files ``:files``."""
    by, param = ("chunk_id", "ids") if of_chunks else ("file_id", "files")
    return d.compiled(("chunks.delete", of_chunks), lambda: sa.delete(chunk_table).where(_files_chunks(d, by, param)))


def moved(vector_store_id: str) -> Work[int | None]:
    """Move a store's version, first in a unit that writes its chunks; the new version (None: no such store)."""
    found = yield first(
        "UPDATE vector_stores SET version = version + 1 WHERE vector_store_id = :vector_store_id RETURNING version",
        vector_store_id=vector_store_id,
    )
    return None if found is None else int(found[0])


def moved_or_missing(vector_store_id: str) -> Work[int]:
    """:func:`moved`, for a store that must exist.

    Raises:
        NotFoundError: the store does not exist.
    """
    version = yield from moved(vector_store_id)
    if version is None:
        raise NotFoundError(f"vector store '{vector_store_id}' not found")
    return version


def drop_files_chunks(d: SqlDialect, vector_store_id: str, file_ids: Sequence[str], version: int) -> Work[None]:
    """Delete these files' chunks in one store, recording a removal at ``version`` for each file that had some."""
    files = d.array(list(file_ids))
    removed = yield _record_removals(d, of_chunks=False).count(
        vector_store_id=vector_store_id, version=version, files=files
    )
    if not removed:
        return
    yield _delete_chunks(d, of_chunks=False).count(vector_store_id=vector_store_id, files=files)
    yield from _prune(vector_store_id, version)


def _prune(vector_store_id: str, version: int) -> Work[None]:
    """Forget the removals older than the last :data:`REMOVALS_KEPT` versions; an index behind them starts again."""
    oldest = version - REMOVALS_KEPT + 1
    pruned = yield count(
        "DELETE FROM chunk_removals WHERE vector_store_id = :vector_store_id AND version < :oldest",
        vector_store_id=vector_store_id,
        oldest=oldest,
    )
    if pruned:
        yield count(
            "UPDATE vector_stores SET removals_from = :oldest WHERE vector_store_id = :vector_store_id",
            vector_store_id=vector_store_id,
            oldest=oldest,
        )


def insert_chunks(d: SqlDialect, vector_store_id: str, chunks: Sequence[ChunkRecord], version: int) -> Work[None]:
    """Insert chunks stamped with ``version``, replacing those of the same ids.

    A replaced chunk is recorded removed as well: the entry that replaces it
    may name another file, and an index that holds it under its old file would
    otherwise keep it when the new file is removed before the index catches up.
    """
    replaced = {"vector_store_id": vector_store_id, "ids": d.array([chunk.chunk_id for chunk in chunks])}
    recorded = yield _record_removals(d, of_chunks=True).count(version=version, **replaced)
    if recorded:
        yield from _prune(vector_store_id, version)
    yield _delete_chunks(d, of_chunks=True).count(**replaced)
    yield each(
        "INSERT INTO chunks (vector_store_id, chunk_id, file_id, position, text, token_count, metadata, "
        "embedding, version) VALUES (:vector_store_id, :chunk_id, :file_id, :position, :text, :token_count, "
        ":metadata, :embedding, :version)",
        [
            {
                "vector_store_id": vector_store_id,
                "chunk_id": chunk.chunk_id,
                "file_id": chunk.file_id,
                "position": chunk.position,
                "text": chunk.text,
                "token_count": chunk.token_count,
                "metadata": json.dumps(chunk.metadata),
                "embedding": chunk.embedding,
                "version": version,
            }
            for chunk in chunks
        ],
    )


def changes_query(d: SqlDialect, texts: bool, embeddings: bool) -> Compiled:
    """One statement (one round trip, one snapshot) reading a store's changes after ``:since``.

    Its rows: first the store's (kind 0, or 1 when the answer is complete:
    ``:since`` is below ``removals_from`` or above the version), then the
    chunks (kind 2) and the removals (kind 3) above the version the answer
    starts from; no row at all when there is no such store. Columns: kind,
    version, chunk id, file id, text, embedding, and the row's id (the order
    of writing). Unordered: a sort of a whole store's wide rows would spill to
    disk on PostgreSQL; :func:`changes` orders them.

    Args:
        d: The database's dialect.
        texts: Whether the chunks' rows carry their text (else NULL).
        embeddings: Whether the chunks' rows carry their embedding (else NULL).
    """

    def build() -> ClauseElement:
        store, since = vector_stores.c, p("since")
        # An index ahead of the store (of a store deleted and made again) starts again too.
        again = sa.or_(since < store.removals_from, since > store.version)
        after = sa.case((again, _MINUS_ONE), else_=since).label("after")
        s = sa.select(store.version, after).where(store.vector_store_id == p("vector_store_id")).cte("s")
        c, r = chunk_table.alias("c"), chunk_removals.alias("r")
        kind = sa.case((s.c.after < _ZERO, _ONE), else_=_ZERO).label("kind")
        head = sa.select(kind, s.c.version, sa.null(), sa.null(), sa.null(), sa.null(), _ZERO)
        text = c.c.text if texts else sa.null()
        embedding = c.c.embedding if embeddings else sa.null()
        added = sa.select(_TWO, c.c.version, c.c.chunk_id, c.c.file_id, text, embedding, c.c.id).select_from(
            s.join(c, sa.and_(c.c.vector_store_id == p("vector_store_id"), c.c.version > s.c.after))
        )
        removed = (
            sa.select(_THREE, r.c.version, r.c.chunk_id, r.c.file_id, sa.null(), sa.null(), r.c.id)
            .select_from(s.join(r, sa.and_(r.c.vector_store_id == p("vector_store_id"), r.c.version > s.c.after)))
            .where(s.c.after >= _ZERO)
        )
        return sa.union_all(head, added, removed)

    return d.compiled(("chunks.changes", texts, embeddings), build)


def changes(found: list[Row]) -> ChunkChanges | None:
    """The changes of the rows of :func:`changes_query` (None: no such store)."""
    head: Row | None = None
    added: list[Row] = []
    removed: list[Row] = []
    for row in found:
        if row[0] == 2:
            added.append(row)
        elif row[0] == 3:
            removed.append(row)
        else:
            head = row
    if head is None:
        return None
    added.sort(key=_ORDER)
    removed.sort(key=_ORDER)
    return ChunkChanges(
        version=int(head[1]),
        complete=head[0] == 1,
        added=[
            ChunkEntry(row[2], row[3], int(row[1]), row[4] or "", b"" if row[5] is None else bytes(row[5]))
            for row in added
        ],
        removed=[ChunkRemoval(int(row[1]), row[3], row[2]) for row in removed],
    )
