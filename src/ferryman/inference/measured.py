"""Model calls measured as OpenTelemetry's GenAI metrics: their duration and the tokens they used."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from ferryman.errors import FerrymanError
from ferryman.metrics.instruments import OPERATION_DURATION, TOKEN_USAGE

from .base import ChatChunk, FinishChunk

T = TypeVar("T")

CHAT = "chat"
EMBEDDINGS = "embeddings"


async def measured_chat(model: str, chunks: AsyncIterator[ChatChunk]) -> AsyncIterator[ChatChunk]:
    """Pass a chat's chunks on, recording its duration and (from its last chunk) its tokens.

    Args:
        model: The model id the caller asked for (a registered one: bounded by the registry).
        chunks: The provider's stream.
    """
    started = time.perf_counter()
    error = ""
    try:
        async for chunk in chunks:
            if isinstance(chunk, FinishChunk) and chunk.usage is not None:
                tokens = TOKEN_USAGE.labels(CHAT, model, "input"), TOKEN_USAGE.labels(CHAT, model, "output")
                tokens[0].observe(chunk.usage.input_tokens)
                tokens[1].observe(chunk.usage.output_tokens)
            yield chunk
    except BaseException as exc:
        error = error_type(exc)
        raise
    finally:
        OPERATION_DURATION.labels(CHAT, model, error).observe(time.perf_counter() - started)


async def measured(operation: str, model: str, call: Awaitable[T]) -> T:
    """Await a model call other than a chat (``embeddings``), recording its duration."""
    started = time.perf_counter()
    error = ""
    try:
        return await call
    except BaseException as exc:
        error = error_type(exc)
        raise
    finally:
        OPERATION_DURATION.labels(operation, model, error).observe(time.perf_counter() - started)


def error_type(exc: BaseException) -> str:
    """How a call failed, in a bounded word: a ferryman failure's code, ``cancelled``, or the exception's class."""
    if isinstance(exc, FerrymanError):
        return str(exc.code)
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        return "cancelled"
    return type(exc).__name__
