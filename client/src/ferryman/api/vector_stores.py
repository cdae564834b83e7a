"""OpenAI Vector Stores API models: stores, their files and batches, search, and file content."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .limits import MAX_FILES_PER_REQUEST, AtMost, Attributes, Id, Metadata, Name, RequiredId, SearchText

FileIds = Annotated[list[RequiredId], AtMost(MAX_FILES_PER_REQUEST)]


class StaticChunking(BaseModel):
    """How a static strategy cuts text."""

    max_chunk_size_tokens: int = Field(800, ge=100, le=4096)
    chunk_overlap_tokens: int = Field(400, ge=0)


class AutoChunkingStrategy(BaseModel):
    """Let the server choose (800 tokens, 400 overlap)."""

    type: Literal["auto"] = "auto"


class StaticChunkingStrategy(BaseModel):
    """Fixed-size chunks."""

    type: Literal["static"] = "static"
    static: StaticChunking


ChunkingStrategy = Annotated[AutoChunkingStrategy | StaticChunkingStrategy, Field(discriminator="type")]


class ExpiresAfter(BaseModel):
    """When a store expires: ``days`` after it was last active."""

    anchor: Literal["last_active_at"] = "last_active_at"
    days: int = Field(ge=1, le=365)


class FileCounts(BaseModel):
    """A store's (or a batch's) files by status."""

    in_progress: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    total: int = 0


class VectorStore(BaseModel):
    """A vector store."""

    id: str
    object: Literal["vector_store"] = "vector_store"
    created_at: int
    name: str
    usage_bytes: int = 0
    file_counts: FileCounts
    status: Literal["expired", "in_progress", "completed"]
    expires_after: ExpiresAfter | None = None
    expires_at: int | None = None
    last_active_at: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    embedding_model: str | None = None
    """Llama Stack's extra: the model the store's chunks are embedded with."""
    embedding_dimension: int | None = None
    provider_id: str | None = None


class VectorStoreList(BaseModel):
    """One page of vector stores."""

    object: Literal["list"] = "list"
    data: list[VectorStore]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class CreateVectorStoreRequest(BaseModel):
    """Create a vector store, optionally with files (ingested in the background)."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    file_ids: FileIds = Field(default_factory=list)
    chunking_strategy: ChunkingStrategy | None = None
    metadata: Metadata | None = None
    expires_after: ExpiresAfter | None = None
    embedding_model: RequiredId | None = None
    embedding_dimension: Annotated[int, Field(ge=1, le=65536)] | None = None
    provider_id: Id | None = None


class UpdateVectorStoreRequest(BaseModel):
    """Change a store's name, metadata or expiry (a field left out is kept; ``expires_after: null`` clears it)."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    metadata: Metadata | None = None
    expires_after: ExpiresAfter | None = None


class VectorStoreDeleted(BaseModel):
    """Answer to a store's delete."""

    id: str
    object: Literal["vector_store.deleted"] = "vector_store.deleted"
    deleted: bool = True


class LastError(BaseModel):
    """Why a file's ingestion failed."""

    code: Literal["server_error", "unsupported_file", "invalid_file"]
    message: str


class VectorStoreFile(BaseModel):
    """A file attached to a vector store."""

    id: str
    object: Literal["vector_store.file"] = "vector_store.file"
    created_at: int
    vector_store_id: str
    status: Literal["in_progress", "completed", "cancelled", "failed"]
    usage_bytes: int = 0
    last_error: LastError | None = None
    attributes: dict[str, str | float | bool] = Field(default_factory=dict)
    chunking_strategy: dict[str, Any] | None = None


class VectorStoreFileList(BaseModel):
    """One page of a store's files."""

    object: Literal["list"] = "list"
    data: list[VectorStoreFile]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class AttachFileRequest(BaseModel):
    """Attach a file to a store."""

    model_config = ConfigDict(extra="forbid")

    file_id: RequiredId
    attributes: Attributes | None = None
    chunking_strategy: ChunkingStrategy | None = None


class UpdateFileAttributesRequest(BaseModel):
    """Replace an attached file's attributes."""

    model_config = ConfigDict(extra="forbid")

    attributes: Attributes | None


class VectorStoreFileDeleted(BaseModel):
    """Answer to a file's detachment."""

    id: str
    object: Literal["vector_store.file.deleted"] = "vector_store.file.deleted"
    deleted: bool = True


class TextContent(BaseModel):
    """A piece of text."""

    type: Literal["text"] = "text"
    text: str


class FileContentPage(BaseModel):
    """An attached file's chunks, in order."""

    object: Literal["vector_store.file_content.page"] = "vector_store.file_content.page"
    data: list[TextContent]
    has_more: bool = False
    next_page: str | None = None


class BatchFile(BaseModel):
    """One file of a batch, with its own attributes."""

    model_config = ConfigDict(extra="forbid")

    file_id: RequiredId
    attributes: Attributes | None = None
    chunking_strategy: ChunkingStrategy | None = None


class CreateFileBatchRequest(BaseModel):
    """Attach several files at once (``file_ids`` with shared attributes, or ``files`` each with its own)."""

    model_config = ConfigDict(extra="forbid")

    file_ids: FileIds | None = None
    files: Annotated[list[BatchFile], AtMost(MAX_FILES_PER_REQUEST)] | None = None
    attributes: Attributes | None = None
    chunking_strategy: ChunkingStrategy | None = None


class VectorStoreFileBatch(BaseModel):
    """A batch of files attached together."""

    id: str
    object: Literal["vector_store.files_batch"] = "vector_store.files_batch"
    created_at: int
    vector_store_id: str
    status: Literal["in_progress", "completed", "cancelled", "failed"]
    file_counts: FileCounts


class ComparisonFilter(BaseModel):
    """Compare one attribute with a value."""

    key: str
    type: Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]
    value: str | float | bool | list[str | float]


class CompoundFilter(BaseModel):
    """Combine filters with ``and`` or ``or``."""

    type: Literal["and", "or"]
    filters: list[ComparisonFilter | CompoundFilter]


class RankingOptions(BaseModel):
    """How results are ranked and cut."""

    ranker: str = "auto"
    """``auto``, ``default-2024-11-15`` or ``none`` (hybrid), or a mode by name: ``hybrid``, ``vector``, ``keyword``."""
    score_threshold: float = Field(0.0, ge=0.0, le=1.0)


class SearchRequest(BaseModel):
    """Search a vector store."""

    query: SearchText | Annotated[list[SearchText], Field(min_length=1, max_length=16)]
    filters: ComparisonFilter | CompoundFilter | None = None
    max_num_results: int = Field(10, ge=1, le=50)
    ranking_options: RankingOptions | None = None
    rewrite_query: bool = False
    search_mode: Literal["vector", "keyword", "hybrid"] | None = None
    """Llama Stack's extra: overrides the ranker's mode."""


class SearchResultItem(BaseModel):
    """One chunk found."""

    file_id: str
    filename: str
    score: float
    attributes: dict[str, str | float | bool] = Field(default_factory=dict)
    content: list[TextContent]


class SearchResultsPage(BaseModel):
    """What a search found, best first."""

    object: Literal["vector_store.search_results.page"] = "vector_store.search_results.page"
    search_query: str | list[str]
    data: list[SearchResultItem]
    has_more: bool = False
    next_page: str | None = None
