"""The offline embedding provider: all-MiniLM-L6-v2 run in this process (see :mod:`.minilm`)."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import anyio.to_thread

from ferryman.errors import InvalidRequestError

from . import minilm_files
from .base import ChatChunk, ChatRequest, ModelInfo

if TYPE_CHECKING:
    from . import minilm

PROVIDER_ID = "local-embeddings"
MODEL_ID = minilm_files.MODEL_ID
METADATA = {"embedding_dimension": minilm_files.DIMENSION, "context_length": minilm_files.MAX_TOKENS}


def local_embeddings_available() -> bool:
    """Whether the model's files are installed (``requirements/models.txt``)."""
    return minilm_files.installed()


_loading = threading.Lock()


@functools.cache
def _cached_encoder(folder: Path | None) -> minilm.MiniLM:
    # The forward pass's modules (numpy, safetensors, tokenizers: about 17 MiB) load with the weights, on the
    # first request: a server that never embeds never imports them.
    from . import minilm

    return minilm.MiniLM(folder)


def _shared_encoder(folder: Path | None) -> minilm.MiniLM:
    """The encoder of ``folder``, loaded once per process: every provider (one per app) shares its weights."""
    with _loading:
        return _cached_encoder(folder)


class LocalEmbeddingProvider:
    """Serves ``all-MiniLM-L6-v2`` embeddings, computed on worker threads one batch at a time.

    The weights load on the first request (about 90 MB, verified against their
    published sha256), so a server that never embeds never pays for them; they
    are loaded once per process, whatever the number of providers.

    Args:
        provider_id: Name of this provider in the model registry.
        folder: The model's files; the installed package's by default.
    """

    def __init__(self, provider_id: str = PROVIDER_ID, folder: Path | None = None) -> None:
        self.provider_id = provider_id
        self._folder = folder
        self._encoder: minilm.MiniLM | None = None
        # One call at a time: each already runs its batches on every core, and
        # waiting here (not in a worker thread) keeps the thread pool free.
        self._lock = asyncio.Lock()

    async def list_models(self) -> list[ModelInfo]:
        """The one model, typed ``embedding``, with its dimension and context length."""
        return [ModelInfo(model_id=MODEL_ID, model_type="embedding", metadata=dict(METADATA))]

    async def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        """Unit-length 384-dimension vectors of ``texts``; each is truncated at 256 word pieces.

        Raises:
            InvalidRequestError: ``model`` is not the one this provider serves.
        """
        if model != MODEL_ID:
            raise InvalidRequestError(f"provider '{self.provider_id}' serves only {MODEL_ID}, not '{model}'", "model")
        if not texts:
            return []
        async with self._lock:
            vectors = await anyio.to_thread.run_sync(self._encode, texts)
        rows: list[list[float]] = vectors.tolist()
        return rows

    def _encode(self, texts: list[str]) -> minilm.Matrix:
        if self._encoder is None:
            self._encoder = _shared_encoder(self._folder)
        return self._encoder.encode(texts)

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """Refuse: an embedding model does not chat.

        Raises:
            InvalidRequestError: always.
        """
        raise InvalidRequestError(f"model '{request.model}' is an embedding model; it cannot chat", "model")
        yield  # an async generator, like every provider's stream_chat

    async def aclose(self) -> None:
        """Nothing to release: the weights stay loaded for the process's other providers."""
