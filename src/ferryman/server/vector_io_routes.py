"""Routes of Llama Stack's vector DBs, vector I/O and RAG tool."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.vector_io import (
    InsertChunksRequest,
    QueryChunksRequest,
    QueryChunksResponse,
    RagInsertRequest,
    RagQueryRequest,
    RAGQueryResult,
    RegisterVectorDbRequest,
    VectorDB,
    VectorDBList,
)

from .contract import Endpoint
from .http import JSONModelResponse, parse_body, services
from .idempotent_routes import take_key


async def register_vector_db(request: Request) -> Response:
    """Register a vector DB under the caller's id (its request's key claimed by the write that stores it)."""
    key = await take_key(request)  # first: a refused body is kept for a repeat, as any client error is
    body = await parse_body(request, RegisterVectorDbRequest)
    return JSONModelResponse(await services(request).vector_dbs.register(body, key))


async def list_vector_dbs(request: Request) -> Response:
    """Every vector DB the caller may read."""
    return JSONModelResponse(VectorDBList(data=await services(request).vector_dbs.list()))


async def get_vector_db(request: Request) -> Response:
    """One vector DB."""
    return JSONModelResponse(await services(request).vector_dbs.get(request.path_params["vector_db_id"]))


async def unregister_vector_db(request: Request) -> Response:
    """Delete a vector DB with its chunks."""
    await services(request).vector_dbs.unregister(request.path_params["vector_db_id"])
    return Response(status_code=200)


async def insert_chunks(request: Request) -> Response:
    """Embed and index chunks in a vector DB."""
    body = await parse_body(request, InsertChunksRequest)
    await services(request).vector_dbs.insert(body)
    return Response(status_code=200)


async def query_chunks(request: Request) -> Response:
    """The best chunks of a vector DB for a query."""
    body = await parse_body(request, QueryChunksRequest)
    return JSONModelResponse(await services(request).vector_dbs.query(body))


async def rag_insert(request: Request) -> Response:
    """Chunk, embed and index documents (text or URLs) in a vector DB."""
    body = await parse_body(request, RagInsertRequest)
    await services(request).vector_dbs.rag_insert(body)
    return Response(status_code=200)


async def rag_query(request: Request) -> Response:
    """Search vector DBs and lay out the chunks found as context for a model."""
    body = await parse_body(request, RagQueryRequest)
    return JSONModelResponse(await services(request).vector_dbs.rag_query(body))


_DBS, _IO, _RAG = "Vector DBs", "Vector IO", "RAG tool"
_DB = "/vector-dbs/{vector_db_id}"

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("POST", "/vector-dbs", register_vector_db, "Register a vector DB", _DBS, RegisterVectorDbRequest,
             VectorDB, errors=(400, 403, 409), creates=True, key_with_run=True,
             example={"vector_db_id": "my-docs", "embedding_model": "all-MiniLM-L6-v2"}),
    Endpoint("GET", "/vector-dbs", list_vector_dbs, "List vector DBs", _DBS, response=VectorDBList, errors=()),
    Endpoint("GET", _DB, get_vector_db, "Get a vector DB", _DBS, response=VectorDB),
    Endpoint("DELETE", _DB, unregister_vector_db, "Unregister a vector DB", _DBS, errors=(404,)),
    Endpoint("POST", "/vector-io/insert", insert_chunks, "Insert chunks into a vector DB", _IO, InsertChunksRequest,
             errors=(400, 404, 502), creates=True),
    Endpoint("POST", "/vector-io/query", query_chunks, "Query a vector DB's chunks", _IO, QueryChunksRequest,
             QueryChunksResponse, errors=(400, 404, 502)),
    Endpoint("POST", "/tool-runtime/rag-tool/insert", rag_insert, "Index documents for the RAG tool", _RAG,
             RagInsertRequest, errors=(400, 404, 502), creates=True),
    Endpoint("POST", "/tool-runtime/rag-tool/query", rag_query, "Query vector DBs for the RAG tool", _RAG,
             RagQueryRequest, RAGQueryResult, errors=(400, 404, 502)),
)  # fmt: skip
"""Llama Stack's vector DB, vector I/O and RAG tool APIs."""
