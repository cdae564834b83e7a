"""The model registry's operations: list, get, register and unregister, persisted."""

from __future__ import annotations

import logging

from ferryman.api.registry import Model, RegisterModelRequest
from ferryman.coordination.base import Fanout, LocalFanout, ModelsChanged
from ferryman.errors import InvalidRequestError
from ferryman.inference.router import ModelRouter
from ferryman.storage.base import ModelStore

log = logging.getLogger(__name__)


class ModelService:
    """Models from the config file, registered at run time, and discovered from providers.

    Args:
        router: The router that serves requests by model id.
        store: Where run-time registrations persist.
        configured: Models declared in the config file (already declared on the router).
        fanout: Tells the other replicas when registrations change.
    """

    def __init__(
        self, router: ModelRouter, store: ModelStore, configured: list[Model], fanout: Fanout | None = None
    ) -> None:
        self._router = router
        self._store = store
        self._configured = {model.identifier: model for model in configured}
        self._fanout = fanout or LocalFanout()

    async def load(self) -> None:
        """Declare the persisted registrations on the router and discover provider models."""
        await self.reload()
        await self._router.refresh()

    async def reload(self) -> None:
        """Declare the configured models and the stored registrations (which win), dropping any other."""
        registered = await self._store.registered_models()
        for model, why in self._router.redeclare([*self._configured.values(), *registered]):
            log.warning("registered model %s is not routable: %s", model.identifier, why)

    async def list(self) -> list[Model]:
        """Every routable model."""
        if not self._router.models():
            await self._router.refresh()
        return self._router.models()

    async def get(self, model_id: str) -> Model:
        """One model, or NotFoundError naming the models that exist."""
        return (await self._router.route(model_id)).model

    async def register(self, request: RegisterModelRequest) -> Model:
        """Route a model id to a provider from now on, across restarts."""
        model = Model(
            identifier=request.model_id,
            provider_id=request.provider_id or self._only_provider(),
            provider_resource_id=request.provider_model_id or request.model_id,
            model_type=request.model_type,
            metadata=request.metadata,
        )
        self._router.declare(model)
        await self._store.save_model(model)
        await self._fanout.notify(ModelsChanged())
        return model

    async def unregister(self, model_id: str) -> None:
        """Forget a model registered at run time (a configured one of the same id comes back)."""
        if await self._store.delete_model(model_id):
            self._router.undeclare(model_id)
            if model_id in self._configured:
                self._router.declare(self._configured[model_id])
            await self._fanout.notify(ModelsChanged())
            return
        if model_id in self._configured:
            raise InvalidRequestError(f"model '{model_id}' is declared in the config file; remove it there", "model_id")
        await self.get(model_id)
        raise InvalidRequestError(
            f"model '{model_id}' is listed by its provider, not registered; it cannot be unregistered", "model_id"
        )

    def _only_provider(self) -> str:
        providers = self._router.providers
        if len(providers) != 1:
            names = ", ".join(p.provider_id for p in providers)
            raise InvalidRequestError(f"provider_id is required when several providers exist ({names})", "provider_id")
        return providers[0].provider_id
