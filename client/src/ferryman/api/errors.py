"""The body of every error answer."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ErrorInfo(BaseModel):
    """What went wrong: a stable code, a message for people, and the offending field if one is to blame.

    Some errors carry more (the provider that failed, the turn's id).
    """

    model_config = ConfigDict(extra="allow")

    code: str
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    """The JSON body of a 4xx or 5xx answer; ``detail`` repeats the message for clients that read only it."""

    error: ErrorInfo
    detail: str
