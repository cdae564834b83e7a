"""Routes of the OpenAI Files API."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.files import FileDeleted, FileList, FileObject, UploadForm
from ferryman.api.limits import Id
from ferryman.errors import InvalidRequestError

from .contract import MULTIPART, Endpoint, Param
from .http import JSONModelResponse, query_int, query_order, services
from .idempotent_routes import take_key

_DOWNLOAD = {"Content-Disposition": "attachment", "X-Content-Type-Options": "nosniff"}


async def upload_file(request: Request) -> Response:
    """Upload a file (multipart: ``file`` and ``purpose``; optionally ``expires_after[seconds]``).

    The body is bounded while it arrives (``BodyLimitMiddleware``: ``files.max_bytes`` and room for the form).
    """
    key = await take_key(request)  # first: a refused form is kept for a repeat, as any client error is
    files = services(request).files
    if not request.headers.get("content-type", "").startswith(MULTIPART):
        raise InvalidRequestError("the body must be multipart/form-data with 'file' and 'purpose'", "file")
    async with request.form(max_files=1, max_fields=8) as form:
        upload = form.get("file")
        purpose = form.get("purpose")
        if not isinstance(upload, UploadFile):
            raise InvalidRequestError("the form needs a 'file' part holding the file", "file")
        if not isinstance(purpose, str):
            raise InvalidRequestError("the form needs a 'purpose' field", "purpose")
        if upload.size is not None and upload.size > files.max_bytes:
            raise files.too_large()
        data = await upload.read()
        seconds = _expiry(form.get("expires_after[seconds]"), form.get("expires_after[anchor]"))
        created = await files.upload(upload.filename or "", data, purpose, upload.content_type, seconds, key)
    return JSONModelResponse(created)


def _expiry(seconds: object, anchor: object) -> int | None:
    if seconds is None:
        return None
    if anchor not in (None, "created_at"):
        raise InvalidRequestError("expires_after[anchor] must be 'created_at'", "expires_after")
    if not isinstance(seconds, str) or not seconds.isdigit():
        raise InvalidRequestError("expires_after[seconds] must be a number of seconds", "expires_after")
    return int(seconds)


async def list_files(request: Request) -> Response:
    """One page of files, optionally of one purpose."""
    limit = query_int(request, "limit", 10000, minimum=1) or 10000
    if limit > 10000:
        raise InvalidRequestError("limit must be at most 10000", "limit")
    purpose = request.query_params.get("purpose") or None
    after = request.query_params.get("after") or None
    return JSONModelResponse(await services(request).files.list(purpose, after, limit, query_order(request)))


async def retrieve_file(request: Request) -> Response:
    """One file."""
    return JSONModelResponse(await services(request).files.get(request.path_params["file_id"]))


async def file_content(request: Request) -> Response:
    """A file's bytes."""
    data, media_type = await services(request).files.content(request.path_params["file_id"])
    # The media type is the uploader's word: a download, never a page a browser renders on this origin.
    return Response(data, media_type=media_type, headers=_DOWNLOAD)


async def delete_file(request: Request) -> Response:
    """Delete a file, its bytes, and its chunks in every vector store."""
    return JSONModelResponse(await services(request).files.delete(request.path_params["file_id"]))


_LIST = (
    Param("purpose", str, "Only files of this purpose."),
    Param("after", Id, "The id after which the page starts."),
    Param("limit", Annotated[int, Field(ge=1, le=10000)], "Most files on the page (default 10000)."),
    Param("order", Literal["asc", "desc"], "Oldest (asc) or newest (desc, the default) first."),
)
_FILES = "Files"
_FILE = "/files/{file_id}"

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("POST", "/files", upload_file, "Upload a file", _FILES, UploadForm, FileObject, errors=(400, 413),
             creates=True, key_with_run=True, body_media_type=MULTIPART),
    Endpoint("GET", "/files", list_files, "List files", _FILES, response=FileList, query=_LIST),
    Endpoint("GET", _FILE, retrieve_file, "Get a file", _FILES, response=FileObject),
    Endpoint("GET", f"{_FILE}/content", file_content, "Get a file's content", _FILES),
    Endpoint("DELETE", _FILE, delete_file, "Delete a file", _FILES, response=FileDeleted),
)  # fmt: skip
"""The OpenAI Files API."""
