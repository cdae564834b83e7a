"""The model registry: which provider serves which model id."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

from ferryman.api.registry import Model
from ferryman.errors import InvalidRequestError, NotFoundError, UpstreamError

from .base import ChatChunk, ChatRequest, InferenceProvider

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Route:
    """One model id and where requests for it go."""

    model: Model
    provider: InferenceProvider


class ModelRouter:
    """Routes each request to the provider of its model.

    Models are discovered from each provider's listing; a lookup that misses
    refreshes the listing once, so a provider that was down at start-up is
    picked up when it comes back.
    """

    def __init__(self, providers: list[InferenceProvider], configured: list[Model] | None = None) -> None:
        self._providers = providers
        self._by_id = {provider.provider_id: provider for provider in providers}
        self._configured = list(configured or [])
        unknown = [m.provider_id for m in self._configured if m.provider_id not in self._by_id]
        if unknown:
            raise InvalidRequestError(f"models name unknown provider(s): {', '.join(sorted(set(unknown)))}")
        self._routes: dict[str, Route] = {}
        self._refresh_lock = asyncio.Lock()

    @property
    def providers(self) -> list[InferenceProvider]:
        """The providers, in the order they were configured."""
        return list(self._providers)

    async def refresh(self) -> None:
        """Ask every provider for its models; a provider that fails is logged and skipped."""
        async with self._refresh_lock:
            routes = {m.identifier: Route(m, self._by_id[m.provider_id]) for m in self._configured}
            for provider in self._providers:
                try:
                    infos = await provider.list_models()
                except UpstreamError as exc:
                    log.warning("could not list models of %s: %s", provider.provider_id, exc)
                    infos = []
                for info in infos:
                    model = Model(
                        identifier=info.model_id,
                        provider_id=provider.provider_id,
                        provider_resource_id=info.model_id,
                        model_type=info.model_type,
                        metadata=dict(info.metadata),
                    )
                    routes.setdefault(info.model_id, Route(model, provider))
            self._routes = routes

    def models(self) -> list[Model]:
        """Every model currently routable."""
        return [route.model for route in self._routes.values()]

    async def route(self, model_id: str) -> Route:
        """Return the route of a model, refreshing the listing once on a miss."""
        route = self._routes.get(model_id)
        if route is None:
            await self.refresh()
            route = self._routes.get(model_id)
        if route is None:
            known = ", ".join(sorted(self._routes)) or "none"
            raise NotFoundError(f"model '{model_id}' not found; available models: {known}")
        return route

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """Stream a chat completion from the provider of ``request.model``."""
        route = await self.route(request.model)
        provider_request = request
        if route.model.provider_resource_id != request.model:
            provider_request = replace(request, model=route.model.provider_resource_id)
        async for chunk in route.provider.stream_chat(provider_request):
            yield chunk

    async def aclose(self) -> None:
        """Close every provider."""
        for provider in self._providers:
            await provider.aclose()
