"""ferryman's Python client: ``Client`` / ``AsyncClient`` over the server's HTTP API.

It needs only ``httpx``, ``httpx-sse`` and ``pydantic`` (and the wire models of ``ferryman.api``),
none of the server's dependencies.
"""

from __future__ import annotations

from ._client import AsyncClient, Client
from ._pagination import AsyncPage, SyncPage
from ._streaming import AsyncStream, ResponseData, ServerEvent, Stream, TurnData
from ._transport import RetryPolicy
from .agent import Agent, AsyncAgent
from .errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    FerrymanClientError,
    InternalServerError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    TurnFailedError,
    UnprocessableEntityError,
)
from .logger import EventLogger
from .react import AsyncReActAgent, ReActAgent
from .tools import ClientTool, client_tool

__all__ = [
    "Agent",
    "AsyncAgent",
    "AsyncReActAgent",
    "ClientTool",
    "EventLogger",
    "ReActAgent",
    "client_tool",
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AsyncClient",
    "AsyncPage",
    "AsyncStream",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "ConflictError",
    "FerrymanClientError",
    "InternalServerError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitError",
    "ResponseData",
    "RetryPolicy",
    "ServerEvent",
    "Stream",
    "SyncPage",
    "TurnData",
    "TurnFailedError",
    "UnprocessableEntityError",
]
