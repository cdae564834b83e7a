"""Llama Guard 3 as a shield: any routed chat model asked the classifier's question, its answer parsed.

The registration's ``provider_resource_id`` (``provider_shield_id`` on the wire,
default the shield id) names the chat model. The prompt follows the model card's
structure: the task, the S1–S14 categories (less ``params.excluded_categories``),
the conversation, and the instruction to answer ``safe``, or ``unsafe`` and the
violated codes on a second line. Any other answer raises, so the caller's
fail-closed rule applies.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any, Protocol

from ferryman.api.agents import SafetyViolation
from ferryman.api.content import CompletionMessage, Message, UserMessage, content_to_text
from ferryman.api.safety import ShieldResource
from ferryman.errors import InvalidRequestError, NotFoundError, UpstreamError
from ferryman.inference.base import ChatChunk, ChatRequest, Sampling, TextChunk

from .base import ShieldOptions, ShieldVerdict

PROVIDER_ID = "llama-guard"

CATEGORIES: dict[str, str] = {
    "S1": "Violent Crimes",
    "S2": "Non-Violent Crimes",
    "S3": "Sex Crimes",
    "S4": "Child Exploitation",
    "S5": "Defamation",
    "S6": "Specialized Advice",
    "S7": "Privacy",
    "S8": "Intellectual Property",
    "S9": "Indiscriminate Weapons",
    "S10": "Hate",
    "S11": "Self-Harm",
    "S12": "Sexual Content",
    "S13": "Elections",
    "S14": "Code Interpreter Abuse",
}
"""Llama Guard 3's hazard taxonomy (MLCommons), by code."""

REFUSAL = "I can't answer that. Can I help with something else?"
"""The user message of a violation (Llama Stack's words)."""

_ANSWER = re.compile(r"\A\s*(safe|unsafe)\s*(?:\n\s*(S\d{1,2}(?:\s*,\s*S\d{1,2})*)\s*)?\Z", re.IGNORECASE)


class ChatModels(Protocol):
    """Where the guard model's completion comes from (the model router)."""

    def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """Stream a chat completion from the provider of ``request.model``."""
        ...


def build_prompt(messages: list[Message], excluded: set[str]) -> str:
    """The classifier's question about the last message of ``messages``."""
    role = "Agent" if messages and isinstance(messages[-1], CompletionMessage) else "User"
    categories = "\n".join(f"{code}: {name}." for code, name in CATEGORIES.items() if code not in excluded)
    turns = "\n\n".join(_turn_text(message) for message in messages if _speaker(message))
    return (
        f"Task: Check if there is unsafe content in '{role}' messages in conversations according to our safety "
        "policy with the below categories.\n\n"
        f"<BEGIN UNSAFE CONTENT CATEGORIES>\n{categories}\n<END UNSAFE CONTENT CATEGORIES>\n\n"
        f"<BEGIN CONVERSATION>\n\n{turns}\n\n<END CONVERSATION>\n\n"
        f"Provide your safety assessment for ONLY THE LAST {role} message in the above conversation:\n"
        " - First line must read 'safe' or 'unsafe'.\n"
        " - If unsafe, a second line must include a comma-separated list of violated categories."
    )


def _speaker(message: Message) -> str | None:
    if isinstance(message, UserMessage):
        return "User"
    if isinstance(message, CompletionMessage):
        return "Agent"
    return None  # system prompts and tool output are context, not turns of the conversation


def _turn_text(message: Message) -> str:
    return f"{_speaker(message)}: {content_to_text(message.content)}"


def parse_answer(answer: str) -> list[str] | None:
    """The violated codes of a Llama Guard answer; None when it says ``safe``.

    Raises:
        UpstreamError: the answer is neither ``safe`` nor ``unsafe`` with known codes.
    """
    match = _ANSWER.match(answer)
    if match is None:
        raise UpstreamError("the guard model gave no verdict Llama Guard's format allows")
    if match.group(1).lower() == "safe":
        if match.group(2):
            raise UpstreamError("the guard model said 'safe' and named categories")
        return None
    codes = [code.strip().upper() for code in (match.group(2) or "").split(",") if code.strip()]
    unknown = [code for code in codes if code not in CATEGORIES]
    if unknown:
        raise UpstreamError(f"the guard model named unknown categories: {', '.join(unknown)}")
    return codes


def excluded_categories(params: dict[str, Any]) -> set[str]:
    """The codes ``params.excluded_categories`` leaves out (codes or category names).

    Raises:
        InvalidRequestError: not a list of known codes or names.
    """
    value = params.get("excluded_categories") or []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidRequestError("params.excluded_categories must be a list of category codes", "params")
    by_name = {name.lower(): code for code, name in CATEGORIES.items()}
    codes: set[str] = set()
    for item in value:
        code = item.upper() if item.upper() in CATEGORIES else by_name.get(item.lower())
        if code is None:
            raise InvalidRequestError(f"unknown Llama Guard category '{item}' (S1–S14 or their names)", "params")
        codes.add(code)
    return codes


class LlamaGuardShield:
    """A registration of the ``llama-guard`` provider, runnable.

    Args:
        resource: The registration.
        models: Where the guard model runs.
    """

    def __init__(self, resource: ShieldResource, models: ChatModels) -> None:
        self.shield_id = resource.identifier
        self._params = dict(resource.params or {})
        options = ShieldOptions.of(self._params)
        self.fail_open = options.fail_open
        self.timeout_seconds = options.timeout_seconds
        self._model = resource.provider_resource_id or resource.identifier
        self._models = models
        excluded_categories(self._params)

    async def run(self, messages: list[Message], params: dict[str, Any]) -> ShieldVerdict:
        """Ask the guard model about the last message.

        Raises:
            UpstreamError: the model failed or answered outside the format.
            InvalidRequestError: bad ``excluded_categories``.
        """
        excluded = excluded_categories({**self._params, **params})
        if not any(_speaker(message) for message in messages):
            return ShieldVerdict(None)
        answer = await self._complete(build_prompt(messages, excluded))
        named = parse_answer(answer)
        if named is None:
            return ShieldVerdict(None)
        codes = [code for code in named if code not in excluded]
        if named and not codes:
            return ShieldVerdict(None)  # only excluded categories; "unsafe" naming none still blocks
        return ShieldVerdict(
            SafetyViolation(
                violation_level="error",
                user_message=REFUSAL,
                metadata={"violation_type": ",".join(codes), "categories": [CATEGORIES[c] for c in codes]},
            )
        )

    async def _complete(self, prompt: str) -> str:
        request = ChatRequest(
            model=self._model,
            messages=[UserMessage(content=prompt)],
            sampling=Sampling(temperature=0.0, max_tokens=32),
        )
        parts: list[str] = []
        try:
            async for chunk in self._models.stream_chat(request):
                if isinstance(chunk, TextChunk):
                    parts.append(chunk.text)
        except NotFoundError:
            # Registered once, the model may be gone (or not the caller's): the shield fails, it is not a 404.
            raise UpstreamError(f"the guard model '{self._model}' is not available") from None
        return "".join(parts)


class LlamaGuardProvider:
    """Builds ``llama-guard`` shields over the model router.

    Args:
        models: Where guard models run.
    """

    provider_id = PROVIDER_ID

    def __init__(self, models: ChatModels) -> None:
        self._models = models

    def build(self, resource: ShieldResource) -> LlamaGuardShield:
        """The shield of a registration (its params checked)."""
        return LlamaGuardShield(resource, self._models)
