"""Plain OpenAI inference (chat completions, embeddings) routed by model to its provider."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from ferryman.errors import InvalidRequestError
from ferryman.inference.base import EmbeddingProvider
from ferryman.inference.context import check_context
from ferryman.inference.measured import measured_chat
from ferryman.inference.openai_adapter import chat_request_from_body, completion, completion_chunks
from ferryman.inference.router import ModelRouter
from ferryman.knowledge.chunking import count_tokens

OpenAIResult = dict[str, Any] | AsyncIterator[dict[str, Any]]
MAX_EMBEDDING_INPUTS = 2048
"""OpenAI's limit on the inputs of one embeddings request."""


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
        """A completion (or a stream of chunks when ``body["stream"]``) from the model's provider.

        Raises:
            ContextLengthExceededError: the prompt is longer than the model's context (a provider that
                takes the request as it is refuses it itself), before a stream starts.
        """
        route = await self._router.route(_model_of(body))
        upstream = {**body, "model": route.model.provider_resource_id}
        if isinstance(route.provider, Passthrough):
            return await route.provider.passthrough("/chat/completions", upstream, provider_data)
        request = chat_request_from_body(upstream, provider_data)
        await check_context(self._router, replace(request, model=route.model.identifier))
        chunks = measured_chat(route.model.identifier, route.provider.stream_chat(request))
        if body.get("stream"):
            return completion_chunks(chunks, route.model.identifier)
        return await completion(chunks, route.model.identifier)

    async def embeddings(self, body: dict[str, Any], provider_data: dict[str, Any] | None) -> dict[str, Any]:
        """Embeddings from the model's provider, in OpenAI's shape.

        An OpenAI-compatible provider gets the request as it is; one that embeds
        itself (the local model) gets the texts, and the answer is built here.
        """
        route = await self._router.route(_model_of(body))
        if isinstance(route.provider, Passthrough):
            upstream = {**body, "model": route.model.provider_resource_id}
            result = await route.provider.passthrough("/embeddings", upstream, provider_data)
            if not isinstance(result, dict):
                raise InvalidRequestError("embeddings cannot be streamed", "stream")
            return result
        if not isinstance(route.provider, EmbeddingProvider):
            raise InvalidRequestError(f"provider '{route.model.provider_id}' does not serve embeddings", "model")
        texts = _inputs(body.get("input"))
        encoding = body.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise InvalidRequestError("encoding_format must be 'float' or 'base64'", "encoding_format")
        dimension = route.model.metadata.get("embedding_dimension")
        if body.get("dimensions") is not None and body["dimensions"] != dimension:
            raise InvalidRequestError(
                f"model '{route.model.identifier}' makes {dimension} dimensions only", "dimensions"
            )
        vectors = await self._router.embed(route.model.identifier, texts)
        tokens = sum(count_tokens(text) for text in texts)
        return {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": _encoded(vector, encoding)}
                for i, vector in enumerate(vectors)
            ],
            "model": route.model.identifier,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _inputs(raw: Any) -> list[str]:
    """The texts of an embeddings request's ``input``: a string or a list of strings, none empty."""
    texts = [raw] if isinstance(raw, str) else raw
    if not isinstance(texts, list) or not texts or not all(isinstance(text, str) for text in texts):
        raise InvalidRequestError("input must be a string or a non-empty list of strings", "input")
    if len(texts) > MAX_EMBEDDING_INPUTS:
        raise InvalidRequestError(f"input holds more than {MAX_EMBEDDING_INPUTS} texts", "input")
    if not all(texts):
        raise InvalidRequestError("input must not hold empty strings", "input")
    return texts


def _encoded(vector: list[float], encoding: str) -> list[float] | str:
    """A vector as floats, or as OpenAI's base64: its float32 values, little-endian."""
    if encoding == "float":
        return vector
    import numpy as np  # with the first vector asked for as base64, not the server's start (numpy's 12 MiB)

    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def _model_of(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidRequestError("field 'model' is required", "model")
    return model
