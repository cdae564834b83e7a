"""OpenAI Files API models: the file object and its list."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

FilePurpose = Literal["assistants", "batch", "fine-tune", "vision", "user_data", "evals"]
PURPOSES: tuple[str, ...] = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")


class FileObject(BaseModel):
    """An uploaded file."""

    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    """Unix seconds."""
    filename: str
    purpose: str
    status: Literal["uploaded", "processed", "error"] = "processed"
    expires_at: int | None = None
    status_details: str | None = None


class FileList(BaseModel):
    """One page of files."""

    object: Literal["list"] = "list"
    data: list[FileObject]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class FileDeleted(BaseModel):
    """Answer to a file's delete."""

    id: str
    object: Literal["file"] = "file"
    deleted: bool = True


class UploadForm(BaseModel):
    """The multipart form of an upload (documented; the route reads the form itself)."""

    file: bytes
    """The file's bytes, with its filename."""
    purpose: FilePurpose
    expires_after: str | None = None
