"""The files attached to vector stores (their ingestion jobs): their columns, records and statements.

Each statement function returns the :class:`~.dialects.Compiled` text of one statement for a dialect, built
once per shape (see :mod:`.dialects`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from ferryman.storage.knowledge import LastError, VectorStoreFileRecord
from ferryman.storage.sql.chunk_changes import drop_files_chunks, moved_or_missing
from ferryman.storage.sql.dialects import Compiled, SqlDialect, p
from ferryman.storage.sql.domain_tables import vector_store_files
from ferryman.storage.sql.keyset import Keyset
from ferryman.storage.sql.seam import Row, Work

F = vector_store_files.c
FILE_COLUMNS = tuple(vector_store_files.c)
"""An attachment's columns, as :func:`file_record` reads them (the table's, in the order ``domain_tables`` names
them)."""
_ATTACHED = ("created_at", "status", "attributes", "chunking_strategy", "usage_bytes", "last_error", "batch_id")
"""The columns an attachment is given (and given again when its file is attached again), with its key's."""


def file_record(d: SqlDialect, row: Row) -> VectorStoreFileRecord:
    """An attachment of a row of :data:`FILE_COLUMNS`."""
    error = json.loads(row[7]) if row[7] is not None else None
    return VectorStoreFileRecord(
        vector_store_id=row[0],
        file_id=row[1],
        created_at=row[2],
        status=row[3],
        attributes=json.loads(row[4]),
        chunking_strategy=json.loads(row[5]),
        usage_bytes=row[6],
        last_error=LastError(error["code"], error["message"]) if error is not None else None,
        batch_id=row[8],
        lease_until=d.read_epoch(row[9]) if row[9] is not None else None,
    )


def attach(d: SqlDialect, vector_store_id: str, files: Sequence[VectorStoreFileRecord]) -> Work[None]:
    """Attach files as new jobs; a file attached already starts over (its chunks dropped)."""
    if not files:
        return
    version = yield from moved_or_missing(vector_store_id)
    yield upsert(d).each(
        [
            {
                "vector_store_id": vector_store_id,
                "file_id": file.file_id,
                "created_at": file.created_at,
                "status": file.status,
                "attributes": json.dumps(file.attributes),
                "chunking_strategy": json.dumps(file.chunking_strategy),
                "usage_bytes": file.usage_bytes,
                "last_error": error_json(file.last_error),
                "batch_id": file.batch_id,
            }
            for file in files
        ],
    )
    yield from drop_files_chunks(d, vector_store_id, [file.file_id for file in files], version)


def error_json(error: LastError | None) -> str | None:
    """The ``last_error`` column's JSON of an error."""
    return json.dumps({"code": error.code, "message": error.message}) if error is not None else None


# -- statements ----------------------------------------------------------------------------------------------


def _of_store() -> sa.ColumnElement[bool]:
    return F.vector_store_id == p("vector_store_id")


def upsert(d: SqlDialect) -> Compiled:
    """Attach ``:file_id`` to ``:vector_store_id`` unclaimed, with the :data:`_ATTACHED` columns' parameters; an
    attachment there already is overwritten."""

    def build() -> sa.Insert:
        values = {name: p(name) for name in ("vector_store_id", "file_id", *_ATTACHED)}
        insert = d.insert(vector_store_files).values({**values, "lease_until": sa.null()})
        again = {name: insert.excluded[name] for name in _ATTACHED}
        return insert.on_conflict_do_update(
            index_elements=[F.vector_store_id, F.file_id], set_={**again, "lease_until": sa.null()}
        )

    return d.compiled("attach.upsert", build)


def listed(d: SqlDialect, page: Keyset, *, of_status: bool, of_batch: bool) -> Compiled:
    """A page of ``:vector_store_id``'s files where ``page`` says, at most ``:limit``; ``of_status``: of status
    ``:status``; ``of_batch``: of batch ``:batch_id``."""

    def build() -> sa.Select[Any]:
        where = [_of_store()]
        where += [F.status == p("status")] if of_status else []
        where += [F.batch_id == p("batch_id")] if of_batch else []
        where += page.bound(F.created_at, F.file_id)
        ordered = page.order_by(F.created_at, F.file_id)
        return sa.select(*FILE_COLUMNS).where(*where).order_by(*ordered).limit(p("limit"))

    return d.compiled(("attach.listed", page.shape, of_status, of_batch), build)


def of_files(d: SqlDialect) -> Compiled:
    """The attachments to ``:vector_store_id`` of the files of list ``:file_ids``."""
    return d.compiled(
        "attach.of_files", lambda: sa.select(*FILE_COLUMNS).where(_of_store(), d.one_of(F.file_id, "file_ids"))
    )


def of_stores(d: SqlDialect) -> Compiled:
    """The files of the stores of list ``:ids`` counted by store and status, with the bytes they hold."""

    def build() -> sa.Select[Any]:
        held = sa.func.coalesce(sa.func.sum(F.usage_bytes), sa.literal_column("0"))
        return (
            sa.select(F.vector_store_id, F.status, sa.func.count(), held)
            .where(d.one_of(F.vector_store_id, "ids"))
            .group_by(F.vector_store_id, F.status)
        )

    return d.compiled("attach.of_stores", build)
