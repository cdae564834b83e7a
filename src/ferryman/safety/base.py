"""The safety seam: shields that inspect messages, the lookup of registered ones, and their registry.

A shield's :meth:`Shield.run` only classifies: it raises when its provider fails
and leaves timeouts and the fail-open/closed decision to its caller, which reads
``fail_open`` and ``timeout_seconds`` off the shield.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ferryman.api.agents import SafetyViolation
from ferryman.api.content import Message
from ferryman.api.safety import ShieldResource
from ferryman.errors import InvalidRequestError, NotFoundError

DEFAULT_TIMEOUT_SECONDS = 10.0
"""How long a shield may take, unless its params say (``timeout_seconds``)."""

ShieldLookup = Callable[[str], Awaitable[ShieldResource]]
"""A stored registration by id, as the current caller may read it; NotFoundError when there is none."""


@dataclass(frozen=True)
class ShieldVerdict:
    """What one shield run found.

    Attributes:
        violation: The violation, or None when the messages are fine. Level ``error``
            blocks; ``warn`` and ``info`` are recorded and the turn goes on.
        redacted: The messages with what the shield found replaced (a redacting
            shield), to be used instead of the inspected ones; None: use them as they are.
    """

    violation: SafetyViolation | None
    redacted: list[Message] | None = None


class Shield(Protocol):
    """Inspects messages and gives a verdict."""

    shield_id: str
    fail_open: bool
    """Whether a failure (a raise or a timeout) lets the messages through; False: it blocks."""
    timeout_seconds: float
    """How long a run may take before the caller treats it as failed."""

    async def run(self, messages: list[Message], params: dict[str, Any]) -> ShieldVerdict:
        """Classify ``messages``.

        Args:
            messages: The conversation to inspect (the last message is the one judged).
            params: The call's own parameters, over the registered ones.

        Raises:
            Exception: the provider failed or answered something unreadable.
        """
        ...


@dataclass(frozen=True)
class ShieldOptions:
    """The run options every shield reads from its params: ``fail_open`` and ``timeout_seconds``."""

    fail_open: bool = False
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS

    @classmethod
    def of(cls, params: dict[str, Any] | None) -> ShieldOptions:
        """Read the options from a shield's params.

        Raises:
            InvalidRequestError: an option of the wrong type or range.
        """
        params = params or {}
        fail_open = params.get("fail_open", False)
        timeout = params.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)
        if not isinstance(fail_open, bool):
            raise InvalidRequestError("params.fail_open must be a boolean", "params")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise InvalidRequestError("params.timeout_seconds must be a positive number", "params")
        return cls(fail_open, float(timeout))


class ShieldProvider(Protocol):
    """Builds runnable shields from registrations naming it."""

    provider_id: str

    def build(self, resource: ShieldResource) -> Shield:
        """The shield a registration describes.

        Raises:
            InvalidRequestError: its params or ``provider_resource_id`` do not suit this provider.
        """
        ...


class ShieldRegistry:
    """The shields turns and the Safety API may name: ones registered in code, and stored registrations.

    Args:
        shields: Shields offered by this process (not stored, not owned).
        providers: The providers stored registrations may name.
    """

    def __init__(self, shields: list[Shield] | None = None, providers: list[ShieldProvider] | None = None) -> None:
        self._shields = {shield.shield_id: shield for shield in shields or []}
        self._providers = {provider.provider_id: provider for provider in providers or []}
        self.registered: ShieldLookup | None = None
        """Where registrations are read from (every replica reads the same); None: in-code shields only."""

    def register(self, shield: Shield) -> None:
        """Offer a shield from code."""
        self._shields[shield.shield_id] = shield

    def add_provider(self, provider: ShieldProvider) -> None:
        """Let registrations name this provider."""
        self._providers[provider.provider_id] = provider

    def is_builtin(self, shield_id: str) -> bool:
        """Whether the id names a shield offered from code."""
        return shield_id in self._shields

    def provider(self, provider_id: str) -> ShieldProvider:
        """A provider by id.

        Raises:
            InvalidRequestError: no such provider.
        """
        if provider_id not in self._providers:
            known = ", ".join(sorted(self._providers)) or "none"
            raise InvalidRequestError(f"unknown shield provider '{provider_id}'; available: {known}", "provider_id")
        return self._providers[provider_id]

    @property
    def provider_ids(self) -> list[str]:
        """The ids of the providers registrations may name."""
        return list(self._providers)

    def build(self, resource: ShieldResource) -> Shield:
        """The runnable shield of a registration (validating it)."""
        return self.provider(resource.provider_id).build(resource)

    async def get(self, shield_id: str) -> Shield:
        """One runnable shield: in code, or registered and readable by the caller.

        Raises:
            NotFoundError: no such shield (for the caller).
        """
        if shield_id in self._shields:
            return self._shields[shield_id]
        if self.registered is None:
            raise NotFoundError(f"shield '{shield_id}' not found")
        return self.build(await self.registered(shield_id))

    async def resolve(self, shield_ids: list[str], field: str) -> list[Shield]:
        """The shields of these ids, in order.

        Raises:
            InvalidRequestError: an id names no shield the caller may use.
        """
        found: list[Shield] = []
        missing: list[str] = []
        for shield_id in shield_ids:
            try:
                found.append(await self.get(shield_id))
            except NotFoundError:
                missing.append(shield_id)
        if missing:
            known = ", ".join(sorted(self._shields)) or "none"
            raise InvalidRequestError(
                f"unknown shield(s) {', '.join(missing)}; in-code: {known} (registered ones are listed at /v1/shields)",
                field,
            )
        return found
