"""Vector stores, the files attached to them (their ingestion jobs) and file batches."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ferryman.errors import ConflictError, NotFoundError

from ..base import KeySettlement
from ..domain.kinds import VECTOR_STORE
from ..domain.vector_stores import vector_stores
from ..kernel import ops
from ..kernel.model import Owner
from ..knowledge import (
    Attributes,
    FileBatchRecord,
    FileCounts,
    IngestionStatus,
    LastError,
    StoreFiles,
    VectorStoreFileRecord,
    VectorStoreRecord,
)
from ..page import Page
from .chunk_changes import drop_files_chunks, moved, moved_or_missing
from .idempotency import claimed, settled
from .keyset import keyset
from .seam import Dialect, Driver, ForeignKeyViolation, Row, UniqueViolation, Work, count, each, first, rows

if TYPE_CHECKING:
    from ..chunk_search import InProcessSearch
    from .kernel import SqlKernel

FILE_COLUMNS = (
    "vector_store_id, file_id, created_at, status, attributes, chunking_strategy, usage_bytes, last_error, "
    "batch_id, lease_until"
)
"""An attachment's columns, as :func:`file_record` reads them."""


def file_record(d: Dialect, row: Row) -> VectorStoreFileRecord:
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


def _attach(d: Dialect, vector_store_id: str, files: Sequence[VectorStoreFileRecord]) -> Work[None]:
    """Attach files as new jobs; a file attached already starts over (its chunks dropped)."""
    if not files:
        return
    version = yield from moved_or_missing(vector_store_id)
    yield each(
        f"INSERT INTO vector_store_files ({FILE_COLUMNS}) VALUES (:vector_store_id, :file_id, "  # noqa: S608
        ":created_at, :status, :attributes, :chunking_strategy, :usage_bytes, :last_error, :batch_id, NULL) "
        "ON CONFLICT (vector_store_id, file_id) DO UPDATE SET created_at = excluded.created_at, "
        "status = excluded.status, attributes = excluded.attributes, "
        "chunking_strategy = excluded.chunking_strategy, usage_bytes = excluded.usage_bytes, "
        "last_error = excluded.last_error, batch_id = excluded.batch_id, lease_until = NULL",
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


class VectorStoreTables:
    """Vector stores, their attachments and batches, over a :class:`Driver`."""

    _db: Driver
    _search: InProcessSearch
    kernel: SqlKernel

    async def create_vector_store(
        self,
        record: VectorStoreRecord,
        files: list[VectorStoreFileRecord],
        owner: Owner | None = None,
        settle: KeySettlement | None = None,
    ) -> None:
        """Store a new vector store's record (with its owner), its index, its first files and ``settle``'s key
        outcome, in one transaction.

        Raises:
            ConflictError: the id is taken.
            IdempotencyKeyHeldError: ``settle`` claims a key an earlier call holds (nothing is written).
        """
        put = vector_stores(self.kernel).put(record, owner=owner)
        d = self._db.dialect

        def work() -> Work[None]:
            yield from claimed(d, settle)  # first: a repeat finds the key held and writes nothing
            yield from self.kernel.writes_within([put])
            try:
                yield count(
                    "INSERT INTO vector_stores (vector_store_id, embedding_dimension, version, removals_from) "
                    "VALUES (:vector_store_id, :embedding_dimension, :version, :version)",
                    vector_store_id=record.vector_store_id,
                    embedding_dimension=record.embedding_dimension,
                    # A store deleted and made again under its id starts above its old versions, and an index
                    # held of the old one is sent the whole new one (it is below ``removals_from``).
                    version=time.time_ns(),
                )
            except UniqueViolation as exc:
                raise ConflictError(f"vector store '{record.vector_store_id}' already exists") from exc
            if (vectors := self._db.dialect.vectors) is not None:
                yield from vectors.prepare(record.embedding_dimension)
            yield from _attach(d, record.vector_store_id, files)
            yield from settled(d, settle)

        await self._db.write(work())

    async def delete_vector_store(self, vector_store_id: str) -> None:
        """Delete a vector store's record with its attachments, batches and chunks (NotFoundError if unknown)."""

        def work() -> Work[bool]:
            # The store's row first, as every writer of its chunks takes it: none is then half way through them.
            if (yield from moved(vector_store_id)) is not None:
                # Its rows go explicitly (not only by cascade), so that SQLite's keyword index follows for sure.
                for table in ("chunks", "vector_store_files", "file_batches", "vector_stores"):
                    yield count(
                        f"DELETE FROM {table} WHERE vector_store_id = :vector_store_id",  # noqa: S608
                        vector_store_id=vector_store_id,
                    )
            (deleted,) = yield from self.kernel.writes_within([ops.Delete(VECTOR_STORE, vector_store_id)])
            return bool(deleted)

        deleted = await self._db.write(work())
        self._search.forget(vector_store_id)
        if not deleted:
            raise NotFoundError(f"vector store '{vector_store_id}' not found")

    async def file_counts(self, vector_store_id: str, batch_id: str | None = None) -> FileCounts:
        """Its files (or one batch's) by status."""
        scope = " AND batch_id = :batch_id" if batch_id is not None else ""
        found = await self._db.read(
            rows(
                f"SELECT status, count(*) FROM vector_store_files WHERE vector_store_id = :vector_store_id{scope} "  # noqa: S608
                "GROUP BY status",
                vector_store_id=vector_store_id,
                **({"batch_id": batch_id} if batch_id is not None else {}),
            )
        )
        return FileCounts(**{status: int(n) for status, n in found})

    async def add_vector_store_files(
        self, vector_store_id: str, files: list[VectorStoreFileRecord], settle: KeySettlement | None = None
    ) -> None:
        """Attach files as new ingestion jobs, with ``settle``'s key outcome; a file attached already is attached
        again (its chunks dropped)."""
        d = self._db.dialect

        def work() -> Work[None]:
            yield from claimed(d, settle)  # first: a repeat finds the key held and writes nothing
            yield from _attach(d, vector_store_id, files)
            yield from settled(d, settle)

        await self._db.write(work())

    async def get_vector_store_file(self, vector_store_id: str, file_id: str) -> VectorStoreFileRecord:
        """One attachment, or NotFoundError."""
        row = await self._db.read(
            first(
                f"SELECT {FILE_COLUMNS} FROM vector_store_files "  # noqa: S608
                "WHERE vector_store_id = :vector_store_id AND file_id = :file_id",
                vector_store_id=vector_store_id,
                file_id=file_id,
            )
        )
        if row is None:
            raise NotFoundError(f"file '{file_id}' not found in vector store '{vector_store_id}'")
        return file_record(self._db.dialect, row)

    async def list_vector_store_files(
        self,
        vector_store_id: str,
        after: str | None,
        limit: int,
        order: str,
        status: IngestionStatus | None = None,
        batch_id: str | None = None,
    ) -> Page[VectorStoreFileRecord]:
        """A store's attachments by creation (NotFoundError for an unknown cursor), optionally of a status or batch."""
        store = " AND vector_store_id = :vector_store_id"
        filters = {"status": status, "batch_id": batch_id}
        scope = "".join(f" AND {name} = :{name}" for name, value in filters.items() if value is not None)

        def work() -> Work[list[Row]]:
            page = yield from keyset(
                "vector_store_files", "file_id", after, order, store, vector_store_id=vector_store_id
            )
            found: list[Row] = yield rows(
                f"SELECT {FILE_COLUMNS} FROM vector_store_files WHERE TRUE{store}{scope}{page.bound} "  # noqa: S608
                f"ORDER BY {page.order_by} LIMIT :limit",
                vector_store_id=vector_store_id,
                limit=limit + 1,
                **{name: value for name, value in filters.items() if value is not None},
                **page.params,
            )
            return found

        found = await self._db.read(work())
        return Page([file_record(self._db.dialect, row) for row in found[:limit]], len(found) > limit)

    async def all_vector_store_files(self, vector_store_id: str) -> list[VectorStoreFileRecord]:
        """Every attachment of a store, by creation."""
        found = await self._db.read(
            rows(
                f"SELECT {FILE_COLUMNS} FROM vector_store_files WHERE vector_store_id = :vector_store_id "  # noqa: S608
                "ORDER BY created_at, file_id",
                vector_store_id=vector_store_id,
            )
        )
        return [file_record(self._db.dialect, row) for row in found]

    async def vector_store_files(self, vector_store_id: str, file_ids: list[str]) -> list[VectorStoreFileRecord]:
        """Those of these files attached to the store, in one read."""
        if not file_ids:
            return []
        d = self._db.dialect
        found = await self._db.read(
            rows(
                f"SELECT {FILE_COLUMNS} FROM vector_store_files WHERE vector_store_id = :vector_store_id "  # noqa: S608
                f"AND {d.any_of('file_id', 'file_ids')}",
                vector_store_id=vector_store_id,
                file_ids=d.array(file_ids),
            )
        )
        return [file_record(d, row) for row in found]

    async def store_files(self, vector_store_ids: list[str]) -> dict[str, StoreFiles]:
        """Each store's files by status and the bytes they hold, counted in one statement."""
        if not vector_store_ids:
            return {}
        d = self._db.dialect
        found = await self._db.read(
            rows(
                "SELECT vector_store_id, status, count(*), coalesce(sum(usage_bytes), 0) "  # noqa: S608
                f"FROM vector_store_files WHERE {d.any_of('vector_store_id', 'ids')} GROUP BY vector_store_id, status",
                ids=d.array(vector_store_ids),
            )
        )
        counts: dict[str, dict[str, int]] = {store_id: {} for store_id in vector_store_ids}
        usage: dict[str, int] = dict.fromkeys(vector_store_ids, 0)
        for store_id, status, files, held in found:
            counts[store_id][status] = int(files)
            usage[store_id] += int(held)
        return {store_id: StoreFiles(FileCounts(**counts[store_id]), usage[store_id]) for store_id in vector_store_ids}

    async def update_vector_store_file(self, vector_store_id: str, file_id: str, attributes: Attributes) -> None:
        """Replace an attachment's attributes; NotFoundError if gone."""
        updated = await self._db.write(
            count(
                "UPDATE vector_store_files SET attributes = :attributes "
                "WHERE vector_store_id = :vector_store_id AND file_id = :file_id",
                attributes=json.dumps(attributes),
                vector_store_id=vector_store_id,
                file_id=file_id,
            )
        )
        if not updated:
            raise NotFoundError(f"file '{file_id}' not found in vector store '{vector_store_id}'")

    async def delete_vector_store_file(self, vector_store_id: str, file_id: str) -> None:
        """Detach a file and drop its chunks (NotFoundError if not attached)."""

        missing = NotFoundError(f"file '{file_id}' not found in vector store '{vector_store_id}'")

        def work() -> Work[None]:
            version = yield from moved(vector_store_id)
            deleted = yield count(
                "DELETE FROM vector_store_files WHERE vector_store_id = :vector_store_id AND file_id = :file_id",
                vector_store_id=vector_store_id,
                file_id=file_id,
            )
            if version is None or not deleted:
                raise missing  # and the version's move is rolled back
            yield from drop_files_chunks(self._db.dialect, vector_store_id, [file_id], version)

        await self._db.write(work())

    async def create_file_batch(
        self, record: FileBatchRecord, files: list[VectorStoreFileRecord], settle: KeySettlement | None = None
    ) -> None:
        """Store a batch and attach its files (each carrying ``batch_id``), with ``settle``'s key outcome;
        NotFoundError if no such store."""
        d = self._db.dialect

        def work() -> Work[None]:
            yield from claimed(d, settle)  # first: a repeat finds the key held and writes nothing
            try:
                yield count(
                    "INSERT INTO file_batches (batch_id, vector_store_id, created_at, cancelled) "
                    "VALUES (:batch_id, :vector_store_id, :created_at, :cancelled)",
                    batch_id=record.batch_id,
                    vector_store_id=record.vector_store_id,
                    created_at=record.created_at,
                    cancelled=record.cancelled,
                )
            except ForeignKeyViolation as exc:
                raise NotFoundError(f"vector store '{record.vector_store_id}' not found") from exc
            except UniqueViolation as exc:
                raise ConflictError(f"file batch '{record.batch_id}' already exists") from exc
            yield from _attach(d, record.vector_store_id, files)
            yield from settled(d, settle)

        await self._db.write(work())

    async def get_file_batch(self, vector_store_id: str, batch_id: str) -> FileBatchRecord:
        """One batch, or NotFoundError."""
        row = await self._db.read(
            first(
                "SELECT batch_id, vector_store_id, created_at, cancelled FROM file_batches "
                "WHERE vector_store_id = :vector_store_id AND batch_id = :batch_id",
                vector_store_id=vector_store_id,
                batch_id=batch_id,
            )
        )
        if row is None:
            raise NotFoundError(f"file batch '{batch_id}' not found in vector store '{vector_store_id}'")
        return FileBatchRecord(row[0], row[1], row[2], bool(row[3]))

    async def cancel_file_batch(self, vector_store_id: str, batch_id: str) -> None:
        """Mark a batch cancelled and its files still in progress ``cancelled`` (their claims then fail)."""

        def work() -> Work[int]:
            found: int = yield count(
                "UPDATE file_batches SET cancelled = :cancelled "
                "WHERE vector_store_id = :vector_store_id AND batch_id = :batch_id",
                cancelled=True,
                vector_store_id=vector_store_id,
                batch_id=batch_id,
            )
            if found:
                yield count(
                    "UPDATE vector_store_files SET status = 'cancelled', lease_until = NULL "
                    "WHERE vector_store_id = :vector_store_id AND batch_id = :batch_id AND status = 'in_progress'",
                    vector_store_id=vector_store_id,
                    batch_id=batch_id,
                )
            return found

        if not await self._db.write(work()):
            raise NotFoundError(f"file batch '{batch_id}' not found in vector store '{vector_store_id}'")
