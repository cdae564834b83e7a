"""The remote-moderation seam: a shield backed by a moderation service (an OpenAI-compatible ``/moderations``).

A :class:`ModerationService` classifies texts; :class:`RemoteModerationShield`
asks it about the last message and turns a flagged result into an ``error``
violation naming OpenAI's categories (``metadata.openai_categories``).
:class:`OpenAICompatibleModeration` is the service over any server that speaks
OpenAI's ``POST /moderations``. The provider (``remote-moderation``) is offered
once the server is given services by name; a registration's
``provider_resource_id`` is ``<service>/<model>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import openai

from ferryman.api.agents import SafetyViolation
from ferryman.api.content import CompletionMessage, Message, UserMessage, content_to_text
from ferryman.api.safety import ShieldResource
from ferryman.errors import InvalidRequestError, UpstreamError
from ferryman.trace_headers import trace_headers

from .base import ShieldOptions, ShieldVerdict

PROVIDER_ID = "remote-moderation"
BLOCKED = "The message was blocked by content moderation."


@dataclass(frozen=True)
class Moderated:
    """A service's verdict on one text."""

    flagged: bool
    categories: list[str]
    """The flagged categories, by OpenAI's names."""
    scores: dict[str, float]


class ModerationService(Protocol):
    """Classifies texts with a moderation model."""

    async def moderate(self, model: str, texts: list[str]) -> list[Moderated]:
        """One verdict per text, in order.

        Raises:
            UpstreamError: the service failed.
        """
        ...


class OpenAICompatibleModeration:
    """OpenAI's ``POST /moderations`` on any server that speaks it.

    Args:
        client: The server's client (base URL and key).
    """

    def __init__(self, client: openai.AsyncOpenAI) -> None:
        self._client = client

    async def moderate(self, model: str, texts: list[str]) -> list[Moderated]:
        """Classify ``texts`` with ``model``."""
        try:
            answer = await self._client.moderations.create(model=model, input=texts, extra_headers=trace_headers())
        except openai.APIError as exc:
            raise UpstreamError(f"the moderation service failed: {type(exc).__name__}") from None
        verdicts = []
        for result in answer.results:
            categories = result.categories.model_dump(by_alias=True)
            scores = result.category_scores.model_dump(by_alias=True)
            hits = [name for name, hit in categories.items() if hit]
            verdicts.append(Moderated(result.flagged, hits, {k: float(v) for k, v in scores.items()}))
        return verdicts


class RemoteModerationShield:
    """A registration of the ``remote-moderation`` provider, runnable.

    Args:
        resource: The registration (``provider_resource_id``: ``<service>/<model>``).
        services: The moderation services by name.
    """

    def __init__(self, resource: ShieldResource, services: dict[str, ModerationService]) -> None:
        self.shield_id = resource.identifier
        options = ShieldOptions.of(resource.params)
        self.fail_open = options.fail_open
        self.timeout_seconds = options.timeout_seconds
        name, _, self._model = (resource.provider_resource_id or "").partition("/")
        if name not in services or not self._model:
            known = ", ".join(sorted(services)) or "none"
            raise InvalidRequestError(
                f"provider_shield_id must be '<service>/<model>' with a service among: {known}", "provider_shield_id"
            )
        self._service = services[name]

    async def run(self, messages: list[Message], params: dict[str, Any]) -> ShieldVerdict:
        """Ask the service about the last user or assistant message."""
        judged = [m for m in messages if isinstance(m, UserMessage | CompletionMessage)]
        if not judged:
            return ShieldVerdict(None)
        [verdict] = await self._service.moderate(self._model, [content_to_text(judged[-1].content)])
        if not verdict.flagged:
            return ShieldVerdict(None)
        metadata = {"openai_categories": verdict.categories, "category_scores": verdict.scores}
        return ShieldVerdict(SafetyViolation(violation_level="error", user_message=BLOCKED, metadata=metadata))


class RemoteModerationProvider:
    """Builds ``remote-moderation`` shields over named moderation services."""

    provider_id = PROVIDER_ID

    def __init__(self, services: dict[str, ModerationService]) -> None:
        self._services = services

    def build(self, resource: ShieldResource) -> RemoteModerationShield:
        """The shield of a registration (its service and model checked)."""
        return RemoteModerationShield(resource, self._services)
