"""Uploaded files' metadata (their bytes are in a blob store, not here)."""

from __future__ import annotations

from ferryman.errors import ConflictError, NotFoundError

from ..knowledge import FileRecord
from ..page import Page
from .chunk_changes import drop_files_chunks, moved
from .keyset import keyset
from .seam import Driver, Row, UniqueViolation, Work, count, rows

_COLUMNS = "file_id, filename, purpose, bytes, created_at, mime_type, expires_at"


def _file(row: Row) -> FileRecord:
    return FileRecord(
        file_id=row[0],
        filename=row[1],
        purpose=row[2],
        bytes=row[3],
        created_at=row[4],
        mime_type=row[5],
        expires_at=row[6],
    )


class FileTables:
    """Files, over a :class:`Driver`."""

    _db: Driver

    async def create_file(self, record: FileRecord) -> None:
        """Store a new file's metadata (ConflictError if its id is taken)."""

        def work() -> Work[None]:
            try:
                yield count(
                    f"INSERT INTO files ({_COLUMNS}) VALUES (:file_id, :filename, :purpose, :bytes, "  # noqa: S608
                    ":created_at, :mime_type, :expires_at)",
                    file_id=record.file_id,
                    filename=record.filename,
                    purpose=record.purpose,
                    bytes=record.bytes,
                    created_at=record.created_at,
                    mime_type=record.mime_type,
                    expires_at=record.expires_at,
                )
            except UniqueViolation as exc:
                raise ConflictError(f"file '{record.file_id}' already exists") from exc

        await self._db.write(work())

    async def get_file(self, file_id: str) -> FileRecord:
        """One file, or NotFoundError."""
        found = await self._db.read(
            rows(f"SELECT {_COLUMNS} FROM files WHERE file_id = :file_id", file_id=file_id)  # noqa: S608
        )
        if not found:
            raise NotFoundError(f"file '{file_id}' not found")
        return _file(found[0])

    async def list_files(self, purpose: str | None, after: str | None, limit: int, order: str) -> Page[FileRecord]:
        """Files by creation, after the cursor's file (NotFoundError if unknown), optionally of one purpose."""

        def work() -> Work[list[Row]]:
            page = yield from keyset("files", "file_id", after, order)
            scope = " AND purpose = :purpose" if purpose is not None else ""
            found: list[Row] = yield rows(
                f"SELECT {_COLUMNS} FROM files WHERE TRUE{scope}{page.bound} "  # noqa: S608
                f"ORDER BY {page.order_by} LIMIT :limit",
                limit=limit + 1,
                **({"purpose": purpose} if purpose is not None else {}),
                **page.params,
            )
            return found

        found = await self._db.read(work())
        return Page([_file(row) for row in found[:limit]], len(found) > limit)

    async def delete_file(self, file_id: str) -> None:
        """Forget a file, its attachments to vector stores and its chunks there (NotFoundError if unknown)."""
        d = self._db.dialect

        def work() -> Work[bool]:
            deleted = yield count("DELETE FROM files WHERE file_id = :file_id", file_id=file_id)
            if not deleted:
                return False
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
            return True

        if not await self._db.write(work()):
            raise NotFoundError(f"file '{file_id}' not found")
