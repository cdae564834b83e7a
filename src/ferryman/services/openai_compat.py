"""Plain OpenAI inference (chat completions, embeddings) routed by model to its provider."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, runtime_checkable

from ferryman.errors import InvalidRequestError
from ferryman.inference.openai_adapter import chat_request_from_body, completion, completion_chunks
from ferryman.inference.router import ModelRouter

OpenAIResult = dict[str, Any] | AsyncIterator[dict[str, Any]]


@runtime_checkable
class Passthrough(Protocol):
    """A provider that speaks the OpenAI API natively and takes requests as they are."""

    async def passthrough(self, path: str, body: dict[str, Any], provider_data: dict[str, Any] | None) -> OpenAIResult:
        """Send the request upstream."""
        ...


class OpenAICompatService:
    """``/v1/chat/completions`` and ``/v1/embeddings`` over the model router."""

    def __init__(self, router: ModelRouter) -> None:
        self._router = router

    async def chat_completions(self, body: dict[str, Any], provider_data: dict[str, Any] | None) -> OpenAIResult:
        """A completion (or a stream of chunks when ``body["stream"]``) from the model's provider."""
        route = await self._router.route(_model_of(body))
        upstream = {**body, "model": route.model.provider_resource_id}
        if isinstance(route.provider, Passthrough):
            return await route.provider.passthrough("/chat/completions", upstream, provider_data)
        chunks = route.provider.stream_chat(chat_request_from_body(upstream, provider_data))
        if body.get("stream"):
            return completion_chunks(chunks, route.model.identifier)
        return await completion(chunks, route.model.identifier)

    async def embeddings(self, body: dict[str, Any], provider_data: dict[str, Any] | None) -> dict[str, Any]:
        """Embeddings from the model's provider."""
        route = await self._router.route(_model_of(body))
        if not isinstance(route.provider, Passthrough):
            raise InvalidRequestError(f"provider '{route.model.provider_id}' does not serve embeddings", "model")
        upstream = {**body, "model": route.model.provider_resource_id}
        result = await route.provider.passthrough("/embeddings", upstream, provider_data)
        if not isinstance(result, dict):
            raise InvalidRequestError("embeddings cannot be streamed", "stream")
        return result


def _model_of(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequestError("field 'model' is required", "model")
    return model
