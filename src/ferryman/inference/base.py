"""The inference seam: what the engine asks of a model provider.

Providers translate these types to their own wire format at the edge; the
engine never sees a vendor type.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ferryman.api.content import Message, ToolDef
from ferryman.api.inference import ResponseFormat


@dataclass(frozen=True)
class Sampling:
    """Sampling settings in provider-neutral form."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    repetition_penalty: float | None = None
    stop: list[str] | None = None


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion request."""

    model: str
    messages: list[Message]
    tools: list[ToolDef] = field(default_factory=list)
    tool_choice: str | None = None
    sampling: Sampling = field(default_factory=Sampling)
    response_format: ResponseFormat | None = None
    provider_data: dict[str, Any] | None = None


@dataclass(frozen=True)
class TextChunk:
    """Text produced since the last chunk."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True)
class ToolCallChunk:
    """A piece of one tool call; ``index`` tells calls apart while they stream."""

    index: int
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True)
class Usage:
    """Token counts of one request."""

    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class FinishChunk:
    """The last chunk: why the model stopped, and usage when known."""

    stop_reason: Literal["end_of_turn", "end_of_message", "out_of_tokens"]
    usage: Usage | None = None
    kind: Literal["finish"] = "finish"


ChatChunk = TextChunk | ToolCallChunk | FinishChunk


@dataclass(frozen=True)
class ContextWindow:
    """How many tokens a model takes, prompt and answer together, and where that number came from."""

    tokens: int
    source: str
    """Where the size came from, for messages: the provider's model list, a setting (named), the runtime."""


@dataclass(frozen=True)
class PromptSize:
    """A prompt's size in tokens, as a provider counted (or estimated) it.

    ``tokens`` is exact, or a bound on the side that decides the check it was asked for
    (see :class:`TokenCounter`); ``at_least`` says it is a lower bound.
    """

    tokens: int
    method: str
    """How the tokens were counted, for messages."""
    at_least: bool = False


@dataclass(frozen=True)
class ModelInfo:
    """A model a provider serves; ``context`` is its context size when the provider publishes one."""

    model_id: str
    model_type: Literal["llm", "embedding"] = "llm"
    metadata: dict[str, Any] = field(default_factory=dict)
    context: ContextWindow | None = None


class InferenceProvider(Protocol):
    """A source of chat completions."""

    provider_id: str

    async def list_models(self) -> list[ModelInfo]:
        """Return the models this provider serves."""
        ...

    def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """Stream the model's answer; the last chunk is a :class:`FinishChunk`."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class EmbeddingProvider(Protocol):
    """A provider that embeds texts itself (the router sends ``embed`` calls to it)."""

    provider_id: str

    async def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order, from ``model`` (the provider's own id of it)."""
        ...


@runtime_checkable
class TokenCounter(Protocol):
    """A provider that counts a prompt's tokens itself, with the model's own tokenizer."""

    async def count_prompt_tokens(self, request: ChatRequest, budget: int) -> PromptSize:
        """The tokens of ``request``'s prompt as the model would read it (template, tools and all).

        The count may stop at a bound once it is clear on which side of ``budget`` the prompt lies: an
        upper bound when it fits (``tokens <= budget``), a lower bound when it does not (``at_least``).
        """
        ...


@runtime_checkable
class ConfiguredContext(Protocol):
    """A provider with a configured context size for models whose size it cannot learn (``None``: none)."""

    context_length: int | None
