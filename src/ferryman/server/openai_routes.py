"""OpenAI-compatible plain inference: ``/v1/chat/completions`` and ``/v1/embeddings``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ferryman.errors import FerrymanError, InvalidRequestError
from ferryman.services.openai_compat import OpenAICompatService

from .http import JSONModelResponse, provider_data, sse_response


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except json.JSONDecodeError as exc:
        raise InvalidRequestError(f"request body is not valid JSON: {exc.msg}") from exc
    if not isinstance(body, dict):
        raise InvalidRequestError("request body must be a JSON object")
    return body


async def _frames(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    try:
        async for chunk in chunks:
            yield f"data: {json.dumps(chunk)}\n\n"
    except FerrymanError as exc:
        # The status line is gone once streaming started: report in-band, as OpenAI does.
        yield f"data: {json.dumps({'error': {'code': exc.code, 'message': exc.message}})}\n\n"
    yield "data: [DONE]\n\n"


def openai_routes(service: OpenAICompatService) -> list[BaseRoute]:
    """The plain inference routes over one service."""

    async def chat_completions(request: Request) -> Response:
        result = await service.chat_completions(await _json_object(request), provider_data(request))
        if isinstance(result, dict):
            return JSONModelResponse(result)
        return sse_response(_frames(result))

    async def embeddings(request: Request) -> Response:
        return JSONModelResponse(await service.embeddings(await _json_object(request), provider_data(request)))

    return [
        Route("/chat/completions", chat_completions, methods=["POST"]),
        Route("/embeddings", embeddings, methods=["POST"]),
    ]
