"""A model's context and a prompt's size: what refuses a prompt the model could not read.

The context size of a model, the first found of:

1. the provider's model list: a remote server that publishes ``max_model_len``, ``context_length`` or
   ``context_window`` there (vLLM and others), the embedded model's runtime (its ``n_ctx``);
2. the model's ``metadata.context_length`` (``models[]`` in the config, or its registration);
3. the provider's ``context_length`` in the config (``providers[]``);

else it is unknown, and nothing is checked. The listing is the router's (read at start-up and on a routing
miss): no request asks a provider for it.

A prompt's tokens are counted by the provider when it can (:class:`~.base.TokenCounter`: the embedded
model, with its own tokenizer over its rendered chat template). A remote model's tokenizer is not
available offline, so its prompt is estimated at one token per :data:`CHARS_PER_TOKEN` characters, an
under-count for ordinary text (tokenizers give 3 to 5 characters a token for prose and code, fewer for
other scripts): what is refused here is over the limit by any count, and a prompt near the limit goes
upstream, whose "context length exceeded" answer fails the same way (:func:`context_overflow`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Protocol

from ferryman.api.content import CompletionMessage, Message, UserMessage, content_to_text
from ferryman.errors import ContextLengthExceededError

from .base import ChatRequest, ContextWindow, PromptSize
from .openai_wire import tool_schema

CHARS_PER_TOKEN = 6
"""Characters per token of the estimate for models without a local tokenizer (see the module's text)."""
ANSWER_TOKENS = 64
"""Tokens kept for the answer when a request sets no ``max_tokens`` (else its ``max_tokens`` are)."""
PUBLISHED_FIELDS = ("max_model_len", "context_length", "context_window")
"""Fields of a model list entry that give the model's context size (vLLM's first)."""

_OVERFLOW = re.compile(r"context[ _-]?(?:length|window|size)|maximum model length|prompt is too long", re.IGNORECASE)
_OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
"""OpenAI's error code, llama.cpp server's error type."""


class ContextModel(Protocol):
    """What the check needs to know of models (the model router)."""

    def context_window(self, model: str) -> ContextWindow | None:
        """The context size of ``model``, or None when it is unknown (nothing is checked then)."""
        ...

    async def prompt_size(self, request: ChatRequest, budget: int) -> PromptSize:
        """The tokens of ``request``'s prompt, exact or bounded against ``budget`` (:class:`~.base.TokenCounter`)."""
        ...


def published_context(entry: Mapping[str, Any]) -> tuple[int, str] | None:
    """The context size a model list entry publishes, with the field that holds it, or None."""
    for name in PUBLISHED_FIELDS:
        value = entry.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, name
    return None


def configured_tokens(value: Any) -> int | None:
    """A configured context size (``metadata.context_length``) when it is a positive integer, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def estimate_prompt_tokens(request: ChatRequest) -> PromptSize:
    """An under-estimate of the prompt's tokens from its characters (see the module's text)."""
    chars = sum(_chars(message) for message in request.messages)
    chars += sum(len(json.dumps(tool_schema(tool))) for tool in request.tools)
    return PromptSize(-(-chars // CHARS_PER_TOKEN), f"estimated at one token per {CHARS_PER_TOKEN} characters")


def _chars(message: Message) -> int:
    chars = len(content_to_text(message.content))
    if isinstance(message, UserMessage) and message.context is not None:
        chars += len(content_to_text(message.context))
    if isinstance(message, CompletionMessage):
        chars += sum(len(call.tool_name) + len(call.arguments_json or "") for call in message.tool_calls or [])
    return chars


def context_overflow(detail: str, *codes: Any) -> bool:
    """Whether a model server's refusal (its message, and its error codes or types) says the prompt is too long."""
    return any(str(code) in _OVERFLOW_CODES for code in codes) or _OVERFLOW.search(detail) is not None


async def check_context(models: ContextModel, request: ChatRequest) -> None:
    """Refuse a request whose prompt, with the tokens kept for the answer, is longer than the model's context.

    Raises:
        ContextLengthExceededError: naming the context size and where it came from, the prompt's tokens and
            how they were counted, and the tokens kept for the answer.
    """
    window = models.context_window(request.model)
    if window is None:
        return
    answer = request.sampling.max_tokens or ANSWER_TOKENS
    kept = f"max_tokens {answer}" if request.sampling.max_tokens else f"{answer} tokens kept for the answer"
    details: dict[str, Any] = {
        "context_length": window.tokens,
        "context_source": window.source,
        "answer_tokens": answer,
    }
    budget = window.tokens - answer
    if budget <= 0:
        raise ContextLengthExceededError(
            f"model '{request.model}' has a context of {window.tokens} tokens ({window.source}): "
            f"{kept} leaves no room for a prompt",
            "max_tokens",
            **details,
        )
    size = await models.prompt_size(request, budget)
    if size.tokens > budget:
        counted = f"{'at least ' if size.at_least else ''}{size.tokens} tokens ({size.method})"
        raise ContextLengthExceededError(
            f"the prompt is {counted}, more than the {budget} that model '{request.model}' can read: its context "
            f"is {window.tokens} tokens ({window.source}), less {kept}; shorten the instructions, input or "
            "history, or use a model with a larger context",
            prompt_tokens=size.tokens,
            **details,
        )
