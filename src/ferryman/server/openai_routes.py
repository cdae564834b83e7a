"""OpenAI-compatible plain inference: ``/v1/chat/completions`` and ``/v1/embeddings``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ferryman.api.inference import OpenAIObject, OpenAIRequest
from ferryman.errors import FerrymanError

from .contract import PROVIDER_DATA, Endpoint, EventStream
from .http import JSONModelResponse, parse_body, provider_data, services, sse_response


async def _json_object(request: Request) -> dict[str, Any]:
    return (await parse_body(request, OpenAIRequest)).model_dump()


async def _frames(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    try:
        async for chunk in chunks:
            yield f"data: {json.dumps(chunk)}\n\n"
    except FerrymanError as exc:
        # The status line is gone once streaming started: report in-band, as OpenAI does.
        yield f"data: {json.dumps({'error': {'code': exc.code, 'message': exc.message}})}\n\n"
    yield "data: [DONE]\n\n"


async def chat_completions(request: Request) -> Response:
    """A chat completion, or its chunks as a stream (``"stream": true``), from the model's provider."""
    result = await services(request).openai.chat_completions(await _json_object(request), provider_data(request))
    if isinstance(result, dict):
        return JSONModelResponse(result)
    return sse_response(_frames(result))


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
