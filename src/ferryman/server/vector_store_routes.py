"""Routes of the OpenAI Vector Stores API: stores, their files, file batches and search."""

from __future__ import annotations

from typing import Annotated, Literal, cast

from pydantic import Field
from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.limits import Id
from ferryman.api.vector_stores import (
    AttachFileRequest,
    CreateFileBatchRequest,
    CreateVectorStoreRequest,
    FileContentPage,
    SearchRequest,
    SearchResultItem,
    SearchResultsPage,
    TextContent,
    UpdateFileAttributesRequest,
    UpdateVectorStoreRequest,
    VectorStore,
    VectorStoreDeleted,
    VectorStoreFile,
    VectorStoreFileBatch,
    VectorStoreFileDeleted,
    VectorStoreFileList,
    VectorStoreList,
)
from ferryman.errors import InvalidRequestError
from ferryman.knowledge.results import RankingOptions, SearchQuery
from ferryman.storage.knowledge import IngestionStatus

from .contract import Endpoint, Param
from .http import JSONModelResponse, cursor_paging, parse_body, services
from .idempotent_routes import take_key

_STATUSES = ("in_progress", "completed", "failed", "cancelled")


def _status(request: Request) -> IngestionStatus | None:
    status = request.query_params.get("filter") or None
    if status is not None and status not in _STATUSES:
        raise InvalidRequestError(f"filter must be one of {', '.join(_STATUSES)}", "filter")
    return cast(IngestionStatus | None, status)


async def create_vector_store(request: Request) -> Response:
    """Create a vector store, optionally with files (ingested in the background); its request's key is claimed
    by the write that stores it."""
    key = await take_key(request)  # first: a refused body is kept for a repeat, as any client error is
    body = await parse_body(request, CreateVectorStoreRequest)
    return JSONModelResponse(await services(request).vector_stores.create(body, key))


async def list_vector_stores(request: Request) -> Response:
    """One page of vector stores."""
    return JSONModelResponse(await services(request).vector_stores.list(*cursor_paging(request)))


async def retrieve_vector_store(request: Request) -> Response:
    """A vector store with its file counts."""
    return JSONModelResponse(await services(request).vector_stores.get(request.path_params["vector_store_id"]))


async def update_vector_store(request: Request) -> Response:
    """Change a vector store's name, metadata or expiry."""
    body = await parse_body(request, UpdateVectorStoreRequest)
    stores = services(request).vector_stores
    return JSONModelResponse(await stores.update(request.path_params["vector_store_id"], body))


async def delete_vector_store(request: Request) -> Response:
    """Delete a vector store with its chunks (its files stay)."""
    return JSONModelResponse(await services(request).vector_stores.delete(request.path_params["vector_store_id"]))


async def search_vector_store(request: Request) -> Response:
    """Search a vector store's chunks."""
    body = await parse_body(request, SearchRequest)
    ranking = body.ranking_options
    query = SearchQuery(
        vector_store_ids=[request.path_params["vector_store_id"]],
        query=body.query,
        max_num_results=body.max_num_results,
        filters=body.filters.model_dump() if body.filters is not None else None,
        ranking=RankingOptions(ranking.ranker, ranking.score_threshold) if ranking else RankingOptions(),
        mode=body.search_mode,
        rewrite_query=body.rewrite_query,
    )
    outcome = await services(request).search.search(query)
    data = [
        SearchResultItem(
            file_id=r.file_id,
            filename=r.filename,
            score=r.score,
            attributes=r.attributes,
            content=[TextContent(text=r.text)],
        )
        for r in outcome.results
    ]
    return JSONModelResponse(SearchResultsPage(search_query=[outcome.search_query], data=data))


async def attach_file(request: Request) -> Response:
    """Attach a file to a vector store (ingested in the background; its request's key claimed by the write that
    attaches it)."""
    key = await take_key(request)  # first: a refused body is kept for a repeat, as any client error is
    body = await parse_body(request, AttachFileRequest)
    stores = services(request).vector_stores
    return JSONModelResponse(await stores.attach(request.path_params["vector_store_id"], body, key))


async def list_vector_store_files(request: Request) -> Response:
    """One page of a vector store's files, optionally of one status (``filter``)."""
    stores = services(request).vector_stores
    page = await stores.list_files(request.path_params["vector_store_id"], *cursor_paging(request), _status(request))
    return JSONModelResponse(page)


async def retrieve_vector_store_file(request: Request) -> Response:
    """One attached file with its ingestion status."""
    p = request.path_params
    return JSONModelResponse(await services(request).vector_stores.get_file(p["vector_store_id"], p["file_id"]))


async def update_vector_store_file(request: Request) -> Response:
    """Replace an attached file's attributes."""
    body = await parse_body(request, UpdateFileAttributesRequest)
    p = request.path_params
    stores = services(request).vector_stores
    return JSONModelResponse(await stores.update_file(p["vector_store_id"], p["file_id"], body.attributes or {}))


async def delete_vector_store_file(request: Request) -> Response:
    """Detach a file from a vector store (the file itself stays)."""
    p = request.path_params
    return JSONModelResponse(await services(request).vector_stores.delete_file(p["vector_store_id"], p["file_id"]))


async def vector_store_file_content(request: Request) -> Response:
    """An attached file's text, chunk by chunk."""
    p = request.path_params
    stores = services(request).vector_stores
    return JSONModelResponse(await stores.file_content(p["vector_store_id"], p["file_id"]))


async def create_file_batch(request: Request) -> Response:
    """Attach several files at once (its request's key claimed by the write that stores the batch)."""
    key = await take_key(request)  # first: a refused body is kept for a repeat, as any client error is
    body = await parse_body(request, CreateFileBatchRequest)
    stores = services(request).vector_stores
    return JSONModelResponse(await stores.create_batch(request.path_params["vector_store_id"], body, key))


async def retrieve_file_batch(request: Request) -> Response:
    """A file batch with its status and counts."""
    p = request.path_params
    return JSONModelResponse(await services(request).vector_stores.get_batch(p["vector_store_id"], p["batch_id"]))


async def cancel_file_batch(request: Request) -> Response:
    """Cancel a file batch: its files not yet ingested end cancelled."""
    p = request.path_params
    stores = services(request).vector_stores
    return JSONModelResponse(await stores.cancel_batch(p["vector_store_id"], p["batch_id"]))


async def list_file_batch_files(request: Request) -> Response:
    """One page of a batch's files, optionally of one status (``filter``)."""
    p = request.path_params
    stores = services(request).vector_stores
    await stores.get_batch(p["vector_store_id"], p["batch_id"])
    page = await stores.list_files(p["vector_store_id"], *cursor_paging(request), _status(request), p["batch_id"])
    return JSONModelResponse(page)


_PAGING = (
    Param("after", Id, "The id after which the page starts."),
    Param("limit", Annotated[int, Field(ge=1, le=100)], "Most entries on the page (default 20)."),
    Param("order", Literal["asc", "desc"], "Oldest (asc) or newest (desc, the default) first."),
)
_FILE_PAGING = (
    *_PAGING,
    Param("filter", Literal["in_progress", "completed", "failed", "cancelled"], "Only files of this status."),
)
_TAG = "Vector stores"
_VS = "/vector_stores/{vector_store_id}"
_FILE = f"{_VS}/files/{{file_id}}"
_BATCH = f"{_VS}/file_batches/{{batch_id}}"

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("POST", "/vector_stores", create_vector_store, "Create a vector store", _TAG, CreateVectorStoreRequest,
             VectorStore, creates=True, key_with_run=True, example={"name": "docs", "file_ids": []}),
    Endpoint("GET", "/vector_stores", list_vector_stores, "List vector stores", _TAG, response=VectorStoreList,
             query=_PAGING),
    Endpoint("GET", _VS, retrieve_vector_store, "Get a vector store", _TAG, response=VectorStore),
    Endpoint("POST", _VS, update_vector_store, "Update a vector store", _TAG, UpdateVectorStoreRequest,
             VectorStore, errors=(400, 403, 404)),
    Endpoint("DELETE", _VS, delete_vector_store, "Delete a vector store", _TAG, response=VectorStoreDeleted,
             errors=(400, 403, 404)),
    Endpoint("POST", f"{_VS}/search", search_vector_store, "Search a vector store", _TAG, SearchRequest,
             SearchResultsPage, errors=(400, 404, 502), example={"query": "how do I reset my password?"}),
    Endpoint("POST", f"{_VS}/files", attach_file, "Attach a file to a vector store", _TAG, AttachFileRequest,
             VectorStoreFile, errors=(400, 403, 404), creates=True, key_with_run=True),
    Endpoint("GET", f"{_VS}/files", list_vector_store_files, "List a vector store's files", _TAG,
             response=VectorStoreFileList, query=_FILE_PAGING),
    Endpoint("GET", _FILE, retrieve_vector_store_file, "Get a vector store's file", _TAG, response=VectorStoreFile),
    Endpoint("POST", _FILE, update_vector_store_file, "Update a vector store file's attributes", _TAG,
             UpdateFileAttributesRequest, VectorStoreFile, errors=(400, 403, 404)),
    Endpoint("DELETE", _FILE, delete_vector_store_file, "Detach a file from a vector store", _TAG,
             response=VectorStoreFileDeleted, errors=(400, 403, 404)),
    Endpoint("GET", f"{_FILE}/content", vector_store_file_content, "Get a vector store file's chunks", _TAG,
             response=FileContentPage),
    Endpoint("POST", f"{_VS}/file_batches", create_file_batch, "Attach a batch of files", _TAG,
             CreateFileBatchRequest, VectorStoreFileBatch, errors=(400, 403, 404), creates=True, key_with_run=True),
    Endpoint("GET", _BATCH, retrieve_file_batch, "Get a file batch", _TAG, response=VectorStoreFileBatch),
    Endpoint("POST", f"{_BATCH}/cancel", cancel_file_batch, "Cancel a file batch", _TAG,
             response=VectorStoreFileBatch, errors=(400, 403, 404)),
    Endpoint("GET", f"{_BATCH}/files", list_file_batch_files, "List a file batch's files", _TAG,
             response=VectorStoreFileList, query=_FILE_PAGING),
)  # fmt: skip
"""The OpenAI Vector Stores API."""
