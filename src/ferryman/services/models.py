"""The model registry's operations: list, get, register and unregister, persisted."""

from __future__ import annotations

import logging

from ferryman.api.registry import Model, RegisterModelRequest
from ferryman.auth.principal import current_principal
from ferryman.coordination.base import Fanout, LocalFanout, ModelsChanged
from ferryman.errors import ConflictError, InvalidRequestError, NotFoundError
from ferryman.inference.router import ModelRouter

from .idempotency import Claim, answered, settlement, stored
from .registrations import Registrations

log = logging.getLogger(__name__)


class ModelService:
    """Models from the config file, registered at run time, and discovered from providers.

    Args:
        router: The router that serves requests by model id.
        registered: The run-time registrations, as each caller may see them.
        configured: Models declared in the config file (already declared on the router).
        fanout: Tells the other replicas when registrations change.
    """

    def __init__(
        self,
        router: ModelRouter,
        registered: Registrations[Model],
        configured: list[Model],
        fanout: Fanout | None = None,
    ) -> None:
        self._router = router
        self._models = registered
        self._configured = {model.identifier: model for model in configured}
        self._fanout = fanout or LocalFanout()
        self._registered: set[str] = set()
        router.hidden = self.hidden_from_caller

    async def load(self) -> None:
        """Declare the persisted registrations on the router and discover provider models."""
        await self.reload()
        await self._router.refresh()

    async def reload(self) -> None:
        """Declare the configured models and the stored registrations (which win), dropping any other."""
        # The router serves everyone: it knows every registration, whoever asks (the server reads them all).
        registered = await self._models.list(None)
        self._registered = {model.identifier for model in registered}
        for model, why in self._router.redeclare([*self._configured.values(), *registered]):
            log.warning("registered model %s is not routable: %s", model.identifier, why)

    async def list(self) -> list[Model]:
        """Every routable model the caller may see (registrations follow the access policy)."""
        if not self._router.models():
            await self._router.refresh()
        hidden = await self._hidden()
        return [model for model in self._router.models() if model.identifier not in hidden]

    async def get(self, model_id: str) -> Model:
        """One model, or NotFoundError naming the models that exist."""
        if model_id in await self._hidden():
            raise NotFoundError(f"model '{model_id}' not found")
        return (await self._router.route(model_id)).model

    async def hidden_from_caller(self, model_id: str) -> set[str]:
        """What the router hides from the current caller; free unless ``model_id`` is a run-time registration."""
        if current_principal.get() is None or (model_id not in self._registered and self._router.knows(model_id)):
            return set()  # configured and provider-listed models serve everyone
        return await self._hidden()

    async def _hidden(self) -> set[str]:
        """The registrations the caller may not see (none when the server itself asks)."""
        who = current_principal.get()
        if who is None:
            return set()
        # Every registration the router knows is already here (kept by reload, register, unregister):
        # only the caller's view needs a read.
        visible = {model.identifier for model in await self._models.list(who)}
        return self._registered - visible

    async def register(self, request: RegisterModelRequest, key: Claim | None = None) -> Model:
        """Route a model id to a provider from now on, across restarts; ``key`` (the request's idempotency key)
        is claimed by the write that stores the registration, answered with it."""
        model = Model(
            identifier=request.model_id,
            provider_id=request.provider_id or self._only_provider(),
            provider_resource_id=request.provider_model_id or request.model_id,
            model_type=request.model_type,
            metadata=request.metadata,
        )
        who = current_principal.get()
        shared = model.identifier not in self._registered and self._router.knows(model.identifier)
        if shared and who is not None:
            # A configured or provider-listed id serves every caller: one caller may not redirect it.
            raise ConflictError(f"model '{model.identifier}' is served to everyone; register it under another id")
        # Checks the caller may (re)place it before anything routes there.
        await self._models.save(who, model, settlement(key, answered(model)))
        # Not kept whatever follows: should telling the other replicas fail, the key is forgotten and a retry
        # registers it (the same registration) and tells them again.
        stored(key)
        self._router.declare(model)
        self._registered.add(model.identifier)
        await self._fanout.notify(ModelsChanged())
        return model

    async def unregister(self, model_id: str) -> None:
        """Forget a model registered at run time (a configured one of the same id comes back)."""
        if await self._models.delete(current_principal.get(), model_id):
            self._registered.discard(model_id)
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
