"""Shields as records, and the Safety API: registering shields, running one, and OpenAI moderations.

Registrations are stored (owned, kind ``shield``) and read back from storage
on every use, so every replica sees the same ones. A run outside a turn applies
the shield's timeout; a shield that fails or times out is an upstream error here
(the caller of the API decides), while turns apply fail-open/closed themselves.
"""

from __future__ import annotations

import asyncio

from ferryman.api.content import UserMessage
from ferryman.api.safety import (
    ModerationRequest,
    ModerationResponse,
    RegisterShieldRequest,
    RunShieldRequest,
    ShieldResource,
)
from ferryman.auth.principal import current_principal
from ferryman.errors import ConflictError, InvalidRequestError, NotFoundError, UpstreamError
from ferryman.ids import new_hex
from ferryman.inference.router import ModelRouter
from ferryman.safety.base import Shield, ShieldRegistry, ShieldVerdict
from ferryman.safety.llama_guard import PROVIDER_ID as LLAMA_GUARD
from ferryman.safety.moderation import moderation_result

from .idempotency import Claim, answered, settlement, stored_record
from .registrations import Registrations

DEFAULT_PROVIDER = LLAMA_GUARD
"""The provider of a registration that names none (Llama Stack's common case: a guard model's id)."""


class SafetyService:
    """Registering, listing, running shields, and moderating text.

    Args:
        registry: The shields turns may name; it looks registrations up through this service (:meth:`get`).
        registered: The registrations (owned: a caller uses the shields it may read).
        models: The model router (a moderation ``model`` may name a guard model directly).
    """

    def __init__(
        self, registry: ShieldRegistry, registered: Registrations[ShieldResource], models: ModelRouter
    ) -> None:
        self._registry = registry
        self._shields = registered
        self._models = models
        registry.registered = self.get

    async def register(self, request: RegisterShieldRequest, key: Claim | None = None) -> ShieldResource:
        """Register a shield; the same registration again is a no-op. ``key`` (the request's idempotency key) is
        claimed by the write that stores a new registration, answered with it.

        Raises:
            InvalidRequestError: an unknown provider, or params the provider refuses.
            ConflictError: the id is offered from code, or registered with other settings (or by another caller).
        """
        shield_id = request.shield_id
        if self._registry.is_builtin(shield_id):
            raise ConflictError(f"shield '{shield_id}' is offered by the server; register under another id")
        resource = ShieldResource(
            identifier=shield_id,
            provider_id=request.provider_id or DEFAULT_PROVIDER,
            provider_resource_id=request.provider_shield_id or shield_id,
            params=request.params or {},
        )
        self._registry.build(resource)
        if resource.provider_id == LLAMA_GUARD:
            await self._check_model(resource.provider_resource_id or shield_id)
        who = current_principal.get()
        existing = await self._shields.find(who, shield_id)
        if existing is None:
            await self._shields.create(who, resource, settlement(key, answered(resource)))
            stored_record(key)
            return resource
        if existing != resource:
            raise ConflictError(f"shield '{shield_id}' is registered with other settings; unregister it first")
        return existing

    async def _check_model(self, model: str) -> None:
        try:
            await self._models.route(model)
        except NotFoundError:
            raise InvalidRequestError(f"no model '{model}' to run the guard on", "provider_shield_id") from None

    async def get(self, shield_id: str) -> ShieldResource:
        """One registration the caller may read, or NotFoundError."""
        return await self._shields.get(current_principal.get(), shield_id)

    async def list_shields(self) -> list[ShieldResource]:
        """The registrations the caller may read, in registration order."""
        return await self._shields.list(current_principal.get())

    async def unregister(self, shield_id: str) -> None:
        """Forget a registration, or NotFoundError."""
        if not await self._shields.delete(current_principal.get(), shield_id):
            raise NotFoundError(f"shield '{shield_id}' not found")

    async def run_shield(self, request: RunShieldRequest) -> ShieldVerdict:
        """Run one shield on messages, with its timeout.

        Raises:
            NotFoundError: no such shield (for the caller).
            InvalidRequestError: params the shield refuses.
            UpstreamError: the shield's provider failed or timed out.
        """
        shield = await self._registry.get(request.shield_id)
        return await _run(shield, request)

    async def moderate(self, request: ModerationRequest) -> ModerationResponse:
        """Classify each input with the shield (or guard model) ``model`` names, in OpenAI's shape.

        Raises:
            InvalidRequestError: no usable ``model`` (no shield or chat model of that name, none registered).
            UpstreamError: the shield's provider failed or timed out.
        """
        model, shield = await self._moderator(request.model)
        texts = [request.input] if isinstance(request.input, str) else request.input
        results = []
        for text in texts:
            verdict = await _run(shield, RunShieldRequest(shield_id=model, messages=[UserMessage(content=text)]))
            results.append(moderation_result(verdict))
        return ModerationResponse(id=f"modr-{new_hex()}", model=model, results=results)

    async def _moderator(self, model: str | None) -> tuple[str, Shield]:
        if model is None:
            registered = await self._shields.list(current_principal.get())
            if not registered:
                raise InvalidRequestError("name a shield or a guard model in 'model' (none is registered)", "model")
            return registered[0].identifier, self._registry.build(registered[0])
        try:
            return model, await self._registry.get(model)
        except NotFoundError:
            pass
        try:
            await self._models.route(model)
        except NotFoundError:
            raise InvalidRequestError(f"'{model}' names no shield and no model", "model") from None
        guard = ShieldResource(identifier=model, provider_id=LLAMA_GUARD, provider_resource_id=model)
        return model, self._registry.build(guard)


async def _run(shield: Shield, request: RunShieldRequest) -> ShieldVerdict:
    try:
        async with asyncio.timeout(shield.timeout_seconds):
            return await shield.run(list(request.messages), dict(request.params))
    except TimeoutError:
        raise UpstreamError(f"shield '{shield.shield_id}' did not answer in {shield.timeout_seconds:g} s") from None
