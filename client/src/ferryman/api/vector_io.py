"""Llama Stack's vector DBs, vector I/O and RAG tool: request and response models (0.2.12's wire shapes)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from .content import URL, InterleavedContent
from .limits import (
    MAX_CHUNKS_PER_INSERT,
    MAX_DOCUMENTS,
    MAX_ID_CHARS,
    MAX_SEARCH_QUERY_CHARS,
    AtMost,
    Id,
    NoControlCharacters,
    RequiredId,
    TextAtMost,
)


class RegisterVectorDbRequest(BaseModel):
    """Body of ``POST /vector-dbs``: the caller names the vector DB."""

    vector_db_id: Annotated[str, Field(min_length=1, pattern=r"^[^/\s]+$"), AtMost(MAX_ID_CHARS), NoControlCharacters()]
    embedding_model: RequiredId
    embedding_dimension: int | None = Field(default=None, ge=1, le=65536)
    provider_id: Id | None = None
    provider_vector_db_id: Id | None = None


class VectorDB(BaseModel):
    """A registered vector DB (a vector store seen through Llama Stack's API)."""

    identifier: str
    provider_id: str
    provider_resource_id: str | None = None
    type: Literal["vector_db"] = "vector_db"
    embedding_model: str
    embedding_dimension: int


class VectorDBList(BaseModel):
    """Answer to ``GET /vector-dbs``."""

    data: list[VectorDB]


class Chunk(BaseModel):
    """One chunk of a document: its content, and metadata that names its ``document_id``."""

    content: InterleavedContent
    metadata: dict[str, Any] = Field(default_factory=dict)
    embedding: list[float] | None = None


class InsertChunksRequest(BaseModel):
    """Body of ``POST /vector-io/insert``."""

    vector_db_id: RequiredId
    chunks: Annotated[list[Chunk], AtMost(MAX_CHUNKS_PER_INSERT)]
    ttl_seconds: int | None = Field(default=None, ge=0)


class QueryChunksRequest(BaseModel):
    """Body of ``POST /vector-io/query``."""

    vector_db_id: RequiredId
    query: Annotated[InterleavedContent, TextAtMost(MAX_SEARCH_QUERY_CHARS)]
    params: dict[str, Any] | None = None


class QueryChunksResponse(BaseModel):
    """The chunks found, best first, with their scores."""

    chunks: list[Chunk]
    scores: list[float]


class RAGDocument(BaseModel):
    """A document for the RAG tool to chunk and index: text, or a URL the server fetches."""

    document_id: RequiredId
    content: InterleavedContent | URL
    mime_type: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class RagInsertRequest(BaseModel):
    """Body of ``POST /tool-runtime/rag-tool/insert``."""

    documents: Annotated[list[RAGDocument], AtMost(MAX_DOCUMENTS)]
    vector_db_id: RequiredId
    chunk_size_in_tokens: int = Field(default=512, ge=100, le=4096)


class DefaultQueryGenerator(BaseModel):
    """The query is the content's text, joined by ``separator``."""

    type: Literal["default"] = "default"
    separator: str = " "


class RRFRanker(BaseModel):
    """Reciprocal rank fusion, the ranker of hybrid search."""

    type: Literal["rrf"] = "rrf"
    impact_factor: float = Field(default=60.0, ge=60.0, le=60.0)


class RAGQueryConfig(BaseModel):
    """How the RAG tool searches and formats what it finds."""

    query_generator_config: DefaultQueryGenerator = Field(default_factory=DefaultQueryGenerator)
    max_tokens_in_context: int = Field(default=4096, ge=1)
    max_chunks: int = Field(default=5, ge=1, le=50)
    chunk_template: str = "Result {index}\nContent: {chunk.content}\nMetadata: {metadata}\n"
    mode: Literal["vector", "keyword", "hybrid"] | None = None
    ranker: RRFRanker | None = None
    """Hybrid mode ranks by reciprocal rank fusion; only its standard ``impact_factor`` (60) is served."""


class RagQueryRequest(BaseModel):
    """Body of ``POST /tool-runtime/rag-tool/query``."""

    content: Annotated[InterleavedContent, TextAtMost(MAX_SEARCH_QUERY_CHARS)]
    vector_db_ids: list[RequiredId] = Field(min_length=1, max_length=20)
    query_config: RAGQueryConfig | None = None


class RAGQueryResult(BaseModel):
    """What the RAG tool found: text for the model, and the chunks as data."""

    content: InterleavedContent | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
