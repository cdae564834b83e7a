"""The model registry: which provider serves which model id."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import cast

from ferryman.api.registry import Model
from ferryman.errors import InvalidRequestError, NotFoundError, UpstreamError

from .base import (
    ChatChunk,
    ChatRequest,
    ConfiguredContext,
    ContextWindow,
    EmbeddingProvider,
    InferenceProvider,
    ModelInfo,
    PromptSize,
    TokenCounter,
)
from .context import configured_tokens, estimate_prompt_tokens
from .local_embeddings import MODEL_ID as LOCAL_EMBEDDING_MODEL
from .measured import EMBEDDINGS, measured, measured_chat

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Route:
    """One model id and where requests for it go."""

    model: Model
    provider: InferenceProvider


def _discovered(provider: InferenceProvider, info: ModelInfo) -> Model:
    return Model(
        identifier=info.model_id,
        provider_id=provider.provider_id,
        provider_resource_id=info.model_id,
        model_type=info.model_type,
        metadata=dict(info.metadata),
    )


HiddenModels = Callable[[str], Awaitable[set[str]]]
"""Given the model id asked for, the ids the current caller may not use (at least that one, if hidden)."""


async def _nothing_hidden(model_id: str) -> set[str]:
    return set()


class ModelRouter:
    """Routes each request to the provider of its model.

    Two sources of models: *declared* ones (from the config file or registered
    at run time), which win, and *discovered* ones, listed by each provider. A
    lookup that misses refreshes the listing once, so a provider that was down
    at start-up is picked up when it comes back.
    """

    def __init__(self, providers: list[InferenceProvider], declared: list[Model] | None = None) -> None:
        self._providers = providers
        self._by_id = {provider.provider_id: provider for provider in providers}
        # Asked on every inference: a runtime-checkable protocol's isinstance costs ~6 us, so it is asked once per
        # provider object (``providers`` holds them all, so their ids stay theirs).
        self._configured = {id(p) for p in providers if isinstance(p, ConfiguredContext)}
        self._counters = {id(p) for p in providers if isinstance(p, TokenCounter)}
        self._declared: dict[str, Model] = {}
        for model in declared or []:
            self.declare(model)
        self._discovered: dict[str, Route] = {}
        self._published: dict[tuple[str, str], ContextWindow] = {}
        """The context sizes providers published in their listings, by (provider id, the provider's model id)."""
        self._refresh_lock = asyncio.Lock()
        self.hidden: HiddenModels = _nothing_hidden
        """The model ids the current caller may not use (registrations of others, under the access policy)."""
        self.default_embedding_model: str | None = None
        """The embedding model of a vector store created without one (the config's ``embeddings.default_model``)."""

    @property
    def providers(self) -> list[InferenceProvider]:
        """The providers, in the order they were configured."""
        return list(self._providers)

    def provider(self, provider_id: str) -> InferenceProvider:
        """A provider by id, or InvalidRequestError naming the ones that exist."""
        provider = self._by_id.get(provider_id)
        if provider is None:
            known = ", ".join(sorted(self._by_id)) or "none"
            raise InvalidRequestError(f"unknown provider '{provider_id}'; providers: {known}", "provider_id")
        return provider

    def declare(self, model: Model) -> None:
        """Route ``model.identifier`` to its provider, ahead of anything discovered."""
        self.provider(model.provider_id)
        self._declared[model.identifier] = model

    def undeclare(self, model_id: str) -> None:
        """Forget a declared model."""
        self._declared.pop(model_id, None)

    def redeclare(self, models: list[Model]) -> list[tuple[Model, str]]:
        """Make ``models`` the declared ones, replacing all; return those not routable, with why."""
        declared: dict[str, Model] = {}
        refused: list[tuple[Model, str]] = []
        for model in models:
            if model.provider_id in self._by_id:
                declared[model.identifier] = model
            else:
                refused.append((model, f"unknown provider '{model.provider_id}'"))
        self._declared = declared
        return refused

    async def refresh(self) -> None:
        """Ask every provider for its models; a provider that fails is logged and skipped."""
        async with self._refresh_lock:
            discovered: dict[str, Route] = {}
            published: dict[tuple[str, str], ContextWindow] = {}
            for provider in self._providers:
                try:
                    infos = await provider.list_models()
                except UpstreamError as exc:
                    log.warning("could not list models of %s: %s", provider.provider_id, exc)
                    infos = []
                for info in infos:
                    discovered.setdefault(info.model_id, Route(_discovered(provider, info), provider))
                    if info.context is not None:
                        published[(provider.provider_id, info.model_id)] = info.context
            self._discovered, self._published = discovered, published

    def models(self) -> list[Model]:
        """Every model currently routable: declared first, then discovered."""
        found = [route.model for mid, route in self._discovered.items() if mid not in self._declared]
        return [*self._declared.values(), *found]

    def knows(self, model_id: str) -> bool:
        """Whether the model id routes somewhere now (without refreshing the providers' listings)."""
        return self._lookup(model_id) is not None

    def _lookup(self, model_id: str) -> Route | None:
        declared = self._declared.get(model_id)
        if declared is not None:
            return Route(declared, self._by_id[declared.provider_id])
        return self._discovered.get(model_id)

    async def route(self, model_id: str) -> Route:
        """Return the route of a model, refreshing the listing once on a miss."""
        route = self._lookup(model_id)
        if route is None:
            await self.refresh()
            route = self._lookup(model_id)
        hidden = await self.hidden(model_id)
        if route is None or model_id in hidden:
            known = ", ".join(sorted(m.identifier for m in self.models() if m.identifier not in hidden)) or "none"
            raise NotFoundError(f"model '{model_id}' not found; available models: {known}")
        return route

    def context_window(self, model_id: str) -> ContextWindow | None:
        """The context size of a routable model, or None when unknown (see :mod:`.context` for the order).

        Reads the current listing only: no provider is asked.
        """
        route = self._lookup(model_id)
        if route is None:
            return None
        provider_id = route.model.provider_id
        published = self._published.get((provider_id, route.model.provider_resource_id))
        if published is not None:
            return published
        declared = configured_tokens(route.model.metadata.get("context_length"))
        if declared is not None and model_id in self._declared:
            return ContextWindow(declared, f"metadata.context_length of model '{model_id}'")
        configured = cast(ConfiguredContext, route.provider) if id(route.provider) in self._configured else None
        if configured is not None and configured.context_length:
            return ContextWindow(configured.context_length, f"providers[].context_length of provider '{provider_id}'")
        return None

    def provider_name(self, model_id: str) -> str | None:
        """The ``provider_id`` of the provider serving ``model_id`` in the current listing (None: unknown)."""
        route = self._lookup(model_id)
        return route.model.provider_id if route is not None else None

    async def prompt_size(self, request: ChatRequest, budget: int) -> PromptSize:
        """The tokens of a request's prompt: counted by its provider if it can, else estimated (:mod:`.context`)."""
        route = self._lookup(request.model)
        if route is None or id(route.provider) not in self._counters:
            return estimate_prompt_tokens(request)
        return await cast(TokenCounter, route.provider).count_prompt_tokens(
            replace(request, model=route.model.provider_resource_id), budget
        )

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """Stream a chat completion from the provider of ``request.model``."""
        route = await self.route(request.model)
        provider_request = request
        if route.model.provider_resource_id != request.model:
            provider_request = replace(request, model=route.model.provider_resource_id)
        async for chunk in measured_chat(request.model, route.provider.stream_chat(provider_request)):
            yield chunk

    def embedding_model(self, model_id: str | None) -> Model:
        """The embedding model named ``model_id``, or the default one when None.

        The default is the configured one, else the local all-MiniLM-L6-v2 if it
        is served, else the first embedding model listed. Looks at the current
        listing (refreshed at start-up and on any routing miss).

        Raises:
            InvalidRequestError: no such model, it is not an embedding model, or there is none at all.
        """
        embedding = [model for model in self.models() if model.model_type == "embedding"]
        if model_id is None:
            model_id = self.default_embedding_model
            if model_id is None:
                ids = [model.identifier for model in embedding]
                model_id = LOCAL_EMBEDDING_MODEL if LOCAL_EMBEDDING_MODEL in ids else next(iter(ids), None)
            if model_id is None:
                raise InvalidRequestError("no embedding model is configured on this server", "embedding_model")
        route = self._lookup(model_id)
        if route is None or route.model.model_type != "embedding":
            known = ", ".join(model.identifier for model in embedding) or "none"
            raise InvalidRequestError(
                f"'{model_id}' is not an embedding model of this server; embedding models: {known}", "embedding_model"
            )
        return route.model

    async def embed(self, model_id: str, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order, from the provider of ``model_id``.

        Raises:
            NotFoundError: no such model.
            InvalidRequestError: its provider does not embed.
            UpstreamError: the provider failed.
        """
        route = await self.route(model_id)
        if not isinstance(route.provider, EmbeddingProvider):
            raise InvalidRequestError(f"provider '{route.model.provider_id}' does not serve embeddings", "model")
        return await measured(EMBEDDINGS, model_id, route.provider.embed(route.model.provider_resource_id, texts))

    async def aclose(self) -> None:
        """Close every provider."""
        for provider in self._providers:
            await provider.aclose()
