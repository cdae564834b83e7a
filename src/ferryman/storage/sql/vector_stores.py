"""Vector stores, the files attached to them (their ingestion jobs) and file batches."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import sqlalchemy as sa

from ferryman.errors import ConflictError, NotFoundError
from ferryman.storage.base import KeySettlement
from ferryman.storage.domain.file_batches import batch_cancelled, batch_written
from ferryman.storage.domain.kinds import VECTOR_STORE
from ferryman.storage.domain.vector_stores import vector_stores
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.knowledge import (
    Attributes,
    FileBatchRecord,
    FileCounts,
    IngestionStatus,
    StoreFiles,
    VectorStoreFileRecord,
    VectorStoreRecord,
)
from ferryman.storage.page import Page
from ferryman.storage.sql import attachments
from ferryman.storage.sql.attachments import file_record
from ferryman.storage.sql.chunk_changes import drop_files_chunks, moved
from ferryman.storage.sql.dialects import Compiled, SqlDialect, p
from ferryman.storage.sql.domain_tables import chunks, vector_store_files
from ferryman.storage.sql.domain_tables import vector_stores as vector_store_table
from ferryman.storage.sql.idempotency import claimed, settled
from ferryman.storage.sql.keyset import keyset
from ferryman.storage.sql.seam import Driver, Row, UniqueViolation, Work, count

if TYPE_CHECKING:
    from ferryman.storage.search.chunk_search import InProcessSearch
    from ferryman.storage.sql.kernel import SqlKernel

_STORE_TABLES = (chunks, vector_store_files, vector_store_table)
"""The tables holding a store's rows, in the order its delete empties them."""


def _delete_rows(d: SqlDialect, table: sa.TableClause) -> Compiled:
    """Delete a table's rows of ``:vector_store_id``."""
    return d.compiled(
        ("vs.delete_rows", table.name),
        lambda: sa.delete(table).where(table.c.vector_store_id == p("vector_store_id")),
    )


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
            yield from attachments.attach(d, record.vector_store_id, files)
            yield from settled(d, settle)

        await self._db.write(work())

    async def delete_vector_store(self, vector_store_id: str) -> None:
        """Delete a vector store's record with its attachments, batches and chunks (NotFoundError if unknown)."""
        d = self._db.dialect

        def work() -> Work[bool]:
            # The store's row first, as every writer of its chunks takes it: none is then half way through them.
            if (yield from moved(vector_store_id)) is not None:
                # Its rows go explicitly (not only by cascade), so that SQLite's keyword index follows for sure.
                for table in _STORE_TABLES:
                    yield _delete_rows(d, table).count(vector_store_id=vector_store_id)
            (deleted,) = yield from self.kernel.writes_within([ops.Delete(VECTOR_STORE, vector_store_id)])
            return bool(deleted)

        deleted = await self._db.write(work())
        self._search.forget(vector_store_id)
        if not deleted:
            raise NotFoundError(f"vector store '{vector_store_id}' not found")

    async def add_vector_store_files(
        self,
        vector_store_id: str,
        files: list[VectorStoreFileRecord],
        settle: KeySettlement | None = None,
        batch: FileBatchRecord | None = None,
    ) -> None:
        """Attach files as new ingestion jobs, with ``settle``'s key outcome and ``batch``'s record, in one
        transaction; a file attached already is attached again (its chunks dropped)."""
        d = self._db.dialect

        def work() -> Work[None]:
            yield from claimed(d, settle)  # first: a repeat finds the key held and writes nothing
            # The store's row before its record's, as its delete takes them: the two cannot wait on each other.
            yield from attachments.attach(d, vector_store_id, files)
            if batch is not None:
                yield from self.kernel.writes_within([batch_written(vector_store_id, batch)])
            yield from settled(d, settle)

        await self._db.write(work())

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
        d = self._db.dialect
        filters = {name: value for name, value in (("status", status), ("batch_id", batch_id)) if value is not None}

        def work() -> Work[list[Row]]:
            page = yield from keyset(d, vector_store_files, "file_id", after, order, vector_store_id=vector_store_id)
            statement = attachments.listed(d, page, of_status=status is not None, of_batch=batch_id is not None)
            found: list[Row] = yield statement.rows(
                vector_store_id=vector_store_id, limit=limit + 1, **filters, **page.params
            )
            return found

        found = await self._db.read(work())
        return Page([file_record(self._db.dialect, row) for row in found[:limit]], len(found) > limit)

    async def vector_store_files(self, vector_store_id: str, file_ids: list[str]) -> list[VectorStoreFileRecord]:
        """Those of these files attached to the store, in one read."""
        if not file_ids:
            return []
        d = self._db.dialect
        found = await self._db.read(
            attachments.of_files(d).rows(vector_store_id=vector_store_id, file_ids=d.array(file_ids))
        )
        return [file_record(d, row) for row in found]

    async def store_files(self, vector_store_ids: list[str]) -> dict[str, StoreFiles]:
        """Each store's files by status and the bytes they hold, counted in one statement."""
        if not vector_store_ids:
            return {}
        d = self._db.dialect
        found = await self._db.read(attachments.of_stores(d).rows(ids=d.array(vector_store_ids)))
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

    async def cancel_file_batch(self, vector_store_id: str, batch_id: str) -> None:
        """Mark a batch cancelled and its files still in progress ``cancelled`` (their claims then fail), in one
        transaction; NotFoundError if the store has no such batch."""

        def work() -> Work[None]:
            # The files before the batch's record, as the store's delete takes them: the two cannot wait on each
            # other. A batch the store lacks is refused after, and the unit rolls the files' update back.
            yield count(
                "UPDATE vector_store_files SET status = 'cancelled', lease_until = NULL "
                "WHERE vector_store_id = :vector_store_id AND batch_id = :batch_id AND status = 'in_progress'",
                vector_store_id=vector_store_id,
                batch_id=batch_id,
            )
            yield from self.kernel.writes_within(batch_cancelled(vector_store_id, batch_id))

        await self._db.write(work())
