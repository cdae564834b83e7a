"""OpenAI-compatible plain inference: ``/v1/chat/completions`` and ``/v1/embeddings``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.inference import OpenAIObject, OpenAIRequest
from ferryman.errors import FerrymanError

from .contract import PROVIDER_DATA, Endpoint, EventStream
from .http import SSE_SEPARATOR, JSONModelResponse, parse_body, provider_data, services, sse_response


async def _json_object(request: Request) -> dict[str, Any]:
    return (await parse_body(request, OpenAIRequest)).model_dump(exclude_unset=True)


async def _events(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[ServerSentEvent]:
    try:
        async for chunk in chunks:
            yield ServerSentEvent(json.dumps(chunk), sep=SSE_SEPARATOR)
    except FerrymanError as exc:
        # The status line is gone once streaming started: report in-band, as OpenAI does.
        yield ServerSentEvent(json.dumps({"error": {"code": exc.code, "message": exc.message}}), sep=SSE_SEPARATOR)
    yield ServerSentEvent("[DONE]", sep=SSE_SEPARATOR)


async def chat_completions(request: Request) -> Response:
    """A chat completion, or its chunks as a stream (``"stream": true``), from the model's provider."""
    result = await services(request).openai.chat_completions(await _json_object(request), provider_data(request))
    if isinstance(result, dict):
        return JSONModelResponse(result)
    return sse_response(_events(result))


async def embeddings(request: Request) -> Response:
    """Embeddings from the model's provider."""
    body = await _json_object(request)
    return JSONModelResponse(await services(request).openai.embeddings(body, provider_data(request)))


_TAG = "Inference"

ROUTES: tuple[Endpoint, ...] = (
    Endpoint("POST", "/chat/completions", chat_completions, "Create a chat completion (OpenAI)", _TAG,
             OpenAIRequest, OpenAIObject, stream=EventStream(), headers=(PROVIDER_DATA,), errors=(400, 404, 502),
             example={"model": "my-model", "messages": [{"role": "user", "content": "Hello"}], "stream": True}),
    Endpoint("POST", "/embeddings", embeddings, "Create embeddings (OpenAI)", _TAG, OpenAIRequest, OpenAIObject,
             headers=(PROVIDER_DATA,), errors=(400, 404, 502)),
)  # fmt: skip
"""Plain inference, OpenAI's request and answer passed through."""
