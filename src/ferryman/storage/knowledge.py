"""The storage seam for knowledge: files, vector stores, their files and batches, and the chunk index.

A *vector store* is the one record behind OpenAI's ``/v1/vector_stores`` and
Llama Stack's ``/v1/vector-dbs``. Files attached to it are ingested in the
background: a :class:`VectorStoreFileRecord` in ``in_progress`` is a job that a
replica claims with a lease (:meth:`IngestionStore.claim_ingestion`), so a
restart or a dead replica loses no job and two replicas never run one twice;
the chunks it makes are written with its final status in one transaction, and
only while the claim is still the claimer's.

Each backend keeps the chunks (text, and unit-length float32 little-endian
embeddings) and a feed of what changed in them (:mod:`.search.chunk_feed`). Keyword
search is BM25 in process on every backend (:mod:`.search.keyword_index`); vector
search is pgvector's on PostgreSQL and in process elsewhere
(:mod:`.search.vector_index`). The in-process indexes are kept current from the feed,
never rebuilt for a write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ferryman.storage.kernel.model import Owner
from ferryman.storage.page import Page

if TYPE_CHECKING:
    from ferryman.storage.base import KeySettlement

IngestionStatus = Literal["in_progress", "completed", "failed", "cancelled"]
Attributes = dict[str, str | float | bool]


@dataclass
class FileRecord:
    """An uploaded file's metadata (its bytes live in a blob store under ``file_id``)."""

    file_id: str
    filename: str
    purpose: str
    bytes: int
    created_at: int
    """Unix seconds."""
    mime_type: str = "application/octet-stream"
    expires_at: int | None = None

    def expired_at(self, at: int) -> bool:
        """Whether the file's expiry has come at ``at`` (Unix seconds)."""
        return self.expires_at is not None and self.expires_at <= at


@dataclass
class VectorStoreRecord:
    """A vector store: its settings; its files' counts are computed, not stored."""

    vector_store_id: str
    name: str
    created_at: int
    embedding_model: str
    embedding_dimension: int
    metadata: dict[str, Any] = field(default_factory=dict)
    chunking_strategy: dict[str, Any] = field(default_factory=dict)
    """The store's default, as the wire shows it (``{"type": "static", "static": {...}}``)."""
    expires_after: dict[str, Any] | None = None
    """``{"anchor": "last_active_at", "days": N}`` or None."""
    last_active_at: int = 0
    provider_id: str | None = None
    """Llama Stack's ``provider_id`` of a vector DB registered through ``/v1/vector-dbs``."""
    provider_vector_db_id: str | None = None


@dataclass
class LastError:
    """Why a file's ingestion failed."""

    code: Literal["server_error", "unsupported_file", "invalid_file"]
    message: str


@dataclass
class VectorStoreFileRecord:
    """A file attached to a vector store: an ingestion job until its status is final."""

    vector_store_id: str
    file_id: str
    created_at: int
    status: IngestionStatus = "in_progress"
    attributes: Attributes = field(default_factory=dict)
    chunking_strategy: dict[str, Any] = field(default_factory=dict)
    usage_bytes: int = 0
    last_error: LastError | None = None
    batch_id: str | None = None
    lease_until: datetime | None = field(default=None, compare=False)
    """While claimed: when the claim lapses unless renewed (written by the store, read by nobody else)."""


@dataclass
class FileCounts:
    """How many of a vector store's (or a batch's) files are in each status."""

    in_progress: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0

    @property
    def total(self) -> int:
        """All of them."""
        return self.in_progress + self.completed + self.failed + self.cancelled


@dataclass
class StoreFiles:
    """A vector store's files by status and the bytes their chunks hold: what its view shows."""

    counts: FileCounts = field(default_factory=FileCounts)
    usage_bytes: int = 0


@dataclass
class FileBatchRecord:
    """A batch of files attached together; its status and counts come from its files."""

    batch_id: str
    vector_store_id: str
    created_at: int
    cancelled: bool = False


@dataclass
class ChunkRecord:
    """One chunk of a document in a vector store."""

    chunk_id: str
    vector_store_id: str
    file_id: str
    """The file it came from, or the ``document_id`` of chunks inserted directly (Llama Stack's vector-io)."""
    position: int
    """Its order within the file."""
    text: str
    embedding: bytes
    """Unit-length float32 vector, little-endian (``numpy.ndarray.tobytes()``)."""
    token_count: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChunkHit:
    """A chunk found by a search, with the backend's score (higher is better; scales differ by kind)."""

    chunk: ChunkRecord
    score: float


class FileStore(Protocol):
    """What a file leaves when it is deleted (its record is the kernel's: ``storage.domain.files``)."""

    async def forget_file(self, file_id: str) -> None:
        """Detach a file from every vector store, with its chunks there (nothing when it is attached nowhere)."""
        ...


class VectorStoreStore(Protocol):
    """Vector stores' files (the stores' and batches' records are the kernel's: ``storage.domain``).

    Every method but ``create_vector_store`` takes a store that exists: the caller read its record first.
    """

    async def create_vector_store(
        self,
        record: VectorStoreRecord,
        files: list[VectorStoreFileRecord],
        owner: Owner | None = None,
        settle: KeySettlement | None = None,
    ) -> None:
        """Store a new vector store: its record (``storage.domain.vector_stores``, with its owner), its index, its
        first files and ``settle``'s idempotency key outcome, in one transaction (ConflictError if the id exists;
        ``IdempotencyKeyHeldError`` if ``settle`` claims a key an earlier call holds: nothing is written)."""
        ...

    async def delete_vector_store(self, vector_store_id: str) -> None:
        """Delete a vector store: its record with its batches', its files' attachments and chunks (NotFoundError
        if unknown)."""
        ...

    async def file_counts(self, vector_store_id: str, batch_id: str | None = None) -> FileCounts:
        """Its files (or one batch's) by status (written once: ``storage.derived_reads``)."""
        ...

    async def add_vector_store_files(
        self,
        vector_store_id: str,
        files: list[VectorStoreFileRecord],
        settle: KeySettlement | None = None,
        batch: FileBatchRecord | None = None,
    ) -> None:
        """Attach files as new ingestion jobs, with ``settle``'s idempotency key outcome and ``batch``'s record
        (``storage.domain.file_batches``: the files carry its id) in the same transaction; a file attached already
        is attached again (its chunks dropped).

        Raises:
            NotFoundError: no such store.
            ConflictError: the batch's id is taken.
        """
        ...

    async def get_vector_store_file(self, vector_store_id: str, file_id: str) -> VectorStoreFileRecord:
        """One attachment, or NotFoundError."""
        ...

    async def list_vector_store_files(
        self,
        vector_store_id: str,
        after: str | None,
        limit: int,
        order: str,
        status: IngestionStatus | None = None,
        batch_id: str | None = None,
    ) -> Page[VectorStoreFileRecord]:
        """A store's attachments by creation, optionally of one status or batch."""
        ...

    async def all_vector_store_files(self, vector_store_id: str) -> list[VectorStoreFileRecord]:
        """Every attachment of a store (for attribute filters)."""
        ...

    async def vector_store_files(self, vector_store_id: str, file_ids: list[str]) -> list[VectorStoreFileRecord]:
        """Those of these files attached to the store, in one read (in no particular order)."""
        ...

    async def store_files(self, vector_store_ids: list[str]) -> dict[str, StoreFiles]:
        """Each store's files by status and the bytes they hold, in one read, without reading the files (a store
        without files, or none, gets zeros)."""
        ...

    async def update_vector_store_file(self, vector_store_id: str, file_id: str, attributes: Attributes) -> None:
        """Replace an attachment's attributes; NotFoundError if gone."""
        ...

    async def delete_vector_store_file(self, vector_store_id: str, file_id: str) -> None:
        """Detach a file and drop its chunks (NotFoundError if not attached)."""
        ...

    async def cancel_file_batch(self, vector_store_id: str, batch_id: str) -> None:
        """Mark a batch's record cancelled (``storage.domain.file_batches``) and its files still in progress
        ``cancelled`` (their claims then fail), in one transaction; NotFoundError if the store has no such batch."""
        ...


class IngestionStore(Protocol):
    """Ingestion jobs, claimed by one replica at a time (server machinery: no caller's access applies)."""

    async def claim_ingestion(self, now: datetime, until: datetime, limit: int) -> list[VectorStoreFileRecord]:
        """Claim up to ``limit`` in-progress files whose claim is absent or lapsed, leasing them ``until``."""
        ...

    async def renew_ingestion(self, jobs: list[tuple[str, str, datetime]], until: datetime) -> list[tuple[str, str]]:
        """Extend the claims on these ``(vector_store_id, file_id, lease_until)`` jobs to ``until``.

        A job is renewed only while it is still in progress under the claim that leased it ``lease_until``
        (the lease it was claimed or last renewed with); one cancelled, detached or claimed again is not.
        Returns the ``(vector_store_id, file_id)`` of the jobs renewed.
        """
        ...

    async def finish_ingestion(
        self, job: VectorStoreFileRecord, chunks: list[ChunkRecord], claimed_until: datetime
    ) -> bool:
        """Store a job's outcome (``job.status``, ``last_error``, ``usage_bytes``) and its chunks, in one transaction.

        Only if the job is still in progress under the claim that leased it ``claimed_until`` (a cancelled,
        detached or re-claimed job writes nothing). Returns whether it wrote.
        """
        ...

    async def ingestion_backlog(self) -> int:
        """How many attached files are still in progress (waiting for a claim or being processed), in every store."""
        ...


class ChunkIndex(Protocol):
    """A vector store's chunks, searchable by keyword and by vector."""

    async def add_chunks(self, vector_store_id: str, chunks: list[ChunkRecord]) -> None:
        """Insert chunks directly (Llama Stack's vector-io insert and RAG tool), replacing same ids."""
        ...

    async def list_chunks(self, vector_store_id: str, file_id: str, after: int | None, limit: int) -> Page[ChunkRecord]:
        """A file's chunks in order, after the given ``position``."""
        ...

    async def keyword_search(
        self, vector_store_id: str, query: str, file_ids: list[str] | None, limit: int
    ) -> list[ChunkHit]:
        """The best chunks for a keyword query by BM25, best first.

        ``file_ids`` restricts to those files (None: all). An empty query finds nothing.
        """
        ...

    async def vector_search(
        self, vector_store_id: str, embedding: list[float], file_ids: list[str] | None, limit: int
    ) -> list[ChunkHit]:
        """The chunks nearest a unit-length query vector by cosine similarity, best first."""
        ...


class KnowledgeStore(FileStore, VectorStoreStore, IngestionStore, ChunkIndex, Protocol):
    """Everything knowledge keeps."""
