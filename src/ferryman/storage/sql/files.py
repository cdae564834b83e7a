"""What a deleted file leaves in the knowledge tables (its record is the kernel's: ``storage.domain.files``)."""

from __future__ import annotations

from ferryman.storage.sql.chunk_changes import drop_files_chunks, moved
from ferryman.storage.sql.seam import Driver, Row, Work, count, rows


class FileTables:
    """Files' attachments to vector stores, over a :class:`Driver`."""

    _db: Driver

    async def forget_file(self, file_id: str) -> None:
        """Detach a file from every vector store, with its chunks there (nothing when it is attached nowhere)."""
        d = self._db.dialect

        def work() -> Work[None]:
            attached: list[Row] = yield rows(
                "SELECT vector_store_id FROM vector_store_files WHERE file_id = :file_id", file_id=file_id
            )
            # Each store's row first (as every writer of its chunks takes it), in one order: units that write
            # several stores never wait on each other in a cycle.
            for vector_store_id in sorted({row[0] for row in attached}):
                version = yield from moved(vector_store_id)
                yield count(
                    "DELETE FROM vector_store_files WHERE vector_store_id = :vector_store_id AND file_id = :file_id",
                    vector_store_id=vector_store_id,
                    file_id=file_id,
                )
                if version is not None:
                    yield from drop_files_chunks(d, vector_store_id, [file_id], version)

        await self._db.write(work())
