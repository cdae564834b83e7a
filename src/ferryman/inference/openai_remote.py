"""A provider for any OpenAI-compatible server (vLLM, Ollama, llama.cpp server, OpenAI)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import orjson

from ferryman.api.inference import GrammarResponseFormat
from ferryman.errors import ContextLengthExceededError, InvalidRequestError, ProviderKeyRejectedError, UpstreamError
from ferryman.logs import redacted_url
from ferryman.trace_headers import trace_headers

from .base import ChatChunk, ChatRequest, ContextWindow, FinishChunk, ModelInfo, TextChunk, ToolCallChunk, Usage
from .context import context_overflow, published_context
from .http1 import Answer, Http1Pool, proxied, sse_data
from .openai_wire import EncodedMessages, message_param, response_format_param, tool_choice_param, tool_schema
from .provider_data import HEADER, api_key_from, key_names, scrub
from .upstream import ERROR_BYTES, UpstreamProblem, retry_delay, status_problem

if TYPE_CHECKING:
    # The SDK (about 16 MiB resident) is imported where it is used: streamed chats and the model list go
    # through http1.py, so a server that only chats (and lists models at its start) never loads it.
    import httpx2
    import openai

_FINISH_REASONS = {"length": "out_of_tokens", "tool_calls": "end_of_message"}
_AUTH_STATUSES = (401, 403)
_TOO_LONG_STATUSES = (400, 413)
_EMBED_BATCH = 256
"""Inputs per ``/embeddings`` request (OpenAI takes at most 2048, local servers often fewer)."""
_MODEL_LIST_BYTES = 16 << 20
"""The largest model list read (a router's list of hundreds of models, each described, is a few MB)."""


class OpenAICompatibleProvider:
    """Talks to one OpenAI-compatible base URL: streamed chats and the model list through :mod:`.http1`, the rest
    (and everything, behind a proxy or over a caller's HTTP client) through the official async client, made on
    first use.

    Args:
        provider_id: Name of this provider in the model registry.
        base_url: The server's base URL, ending in ``/v1``.
        api_key: Bearer key; servers that need none accept any string.
        timeout: Seconds allowed for one upstream request.
        max_retries: Retries, with exponential backoff, on connection errors, 429 and 5xx.
        kind: The kind of server (``openai``, ``vllm``, ``ollama``…), which names the
            per-request provider-data keys it accepts.
        http_client: The HTTP client to reach the server with (tests serve one in process); the SDK's own by default.
        context_length: The context size of the server's models when its model list publishes none (None: unknown).
    """

    def __init__(
        self,
        provider_id: str,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        kind: str = "openai-compatible",
        http_client: httpx2.AsyncClient | None = None,
        context_length: int | None = None,
    ) -> None:
        self.provider_id = provider_id
        self.base_url = base_url
        self.context_length = context_length
        self._key_names = key_names(provider_id, kind)
        self._api_key = api_key
        self._max_retries = max_retries
        # The hot path's own client (``http1.py``), unless the caller brought one (tests serve a model in
        # process) or the environment routes the server through a proxy.
        self._lean = None if http_client is not None or proxied(base_url) else Http1Pool(base_url, timeout)
        self._timeout = timeout
        self._http_client = http_client
        self._sdk: openai.AsyncOpenAI | None = None
        self._encoded = EncodedMessages()  # a long history is encoded once, then only what each turn adds

    @property
    def _client(self) -> openai.AsyncOpenAI:
        """The SDK's client, made (and the SDK imported) by the first request that goes through it."""
        if self._sdk is None:
            import openai

            self._sdk = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=self._api_key or "none",
                timeout=self._timeout,
                max_retries=self._max_retries,
                http_client=self._http_client,
            )
        return self._sdk

    async def list_models(self) -> list[ModelInfo]:
        """Return every model the server lists at ``/models``, with the context size it publishes for each."""
        where = f"provider {self.provider_id} at {redacted_url(self.base_url)}"
        listed = await self._lean_models(where) if self._lean else await self._sdk_models(where)
        return [self._info(model_id, entry) for model_id, entry in listed]

    async def _sdk_models(self, where: str) -> list[tuple[str, dict[str, Any]]]:
        """Each listed model's id and its fields beyond OpenAI's, through the SDK."""
        import openai

        try:
            page = await self._client.models.list()
        except openai.OpenAIError as exc:
            raise self._failure(_sdk_problem(exc), None, where) from exc
        return [(model.id, model.model_extra or {}) for model in page.data]

    async def _lean_models(self, where: str) -> list[tuple[str, dict[str, Any]]]:
        """Each listed model's id and its fields, through :class:`Http1Pool`."""
        lean = self._lean
        assert lean is not None
        headers = [self._bearer(None)]
        async with self._lean_answer(lambda: lean.get("/models", headers), None, where) as answer:
            return _listed(await answer.read(_MODEL_LIST_BYTES), where)

    @asynccontextmanager
    async def _lean_answer(
        self, send: Callable[[], AbstractAsyncContextManager[Answer]], key: str | None, context: str
    ) -> AsyncIterator[Answer]:
        """The first answer of status below 300 to the request ``send`` makes, sent again as the SDK would
        (connection errors, timeouts, 408, 409, 429 and 5xx, after a backoff or the server's ``retry-after``)
        until the retries are spent. Once the answer is handed over, nothing is sent again: a stream that
        fails midway fails the call.
        """
        attempt = 0
        while True:
            handed = False
            cause: BaseException | None = None
            try:
                async with send() as answer:
                    if answer.status < 300:
                        handed = True
                        yield answer
                        return
                    problem = status_problem(answer.status, await answer.read(ERROR_BYTES))
                    delay = retry_delay(attempt, answer.status, answer.headers)
            except OSError as exc:  # TimeoutError among them
                said = "Request timed out." if isinstance(exc, TimeoutError) else "Connection error."
                if handed:
                    raise self._failure(UpstreamProblem(None, said), key, context) from exc
                problem, delay, cause = UpstreamProblem(None, said), retry_delay(attempt), exc
            if delay is None or attempt >= self._max_retries:
                raise self._failure(problem, key, context) from cause
            attempt += 1
            await asyncio.sleep(delay)

    def _info(self, model_id: str, entry: dict[str, Any]) -> ModelInfo:
        published = published_context(entry)
        if published is None:
            return ModelInfo(model_id=model_id)
        tokens, name = published
        source = f"{name} in the model list of provider '{self.provider_id}'"
        return ModelInfo(model_id, metadata={"context_length": tokens}, context=ContextWindow(tokens, source))

    def _client_for(self, provider_data: dict[str, Any] | None) -> tuple[openai.AsyncOpenAI, str | None]:
        key = api_key_from(provider_data, self._key_names)
        return self._client_with(key), key

    def _client_with(self, key: str | None) -> openai.AsyncOpenAI:
        """The SDK's client, sending the caller's ``key`` when there is one (else the configured key)."""
        return self._client if key is None else self._client.with_options(api_key=key)

    def _bearer(self, key: str | None) -> tuple[str, str]:
        """The ``Authorization`` header of a request of the lean client (the caller's key, else the configured one)."""
        return ("Authorization", f"Bearer {key or self._api_key or 'none'}")

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """Stream one chat completion, translating chunks to ours."""
        key = api_key_from(request.provider_data, self._key_names)
        context = f"model {request.model} failed upstream"
        if self._lean:
            chunks = self._lean_chunks(self._params(request, self._encoded.fragments(request.messages)), key, context)
        else:
            messages = [message_param(message) for message in request.messages]
            chunks = self._sdk_chunks(self._params(request, messages), key, context)
        finish: str | None = None
        usage: Usage | None = None
        async for chunk in chunks:
            if chunk.get("usage"):
                usage = Usage(chunk["usage"].get("prompt_tokens", 0), chunk["usage"].get("completion_tokens", 0))
            for choice in (chunk.get("choices") or [])[:1]:
                for piece in _chunks_of(choice.get("delta") or {}):
                    yield piece
                finish = choice.get("finish_reason") or finish
        yield FinishChunk(stop_reason=_FINISH_REASONS.get(finish or "", "end_of_turn"), usage=usage)  # type: ignore[arg-type]

    async def _sdk_chunks(self, params: dict[str, Any], key: str | None, context: str) -> AsyncIterator[dict[str, Any]]:
        """The streamed chunks through the SDK (an HTTP client of the caller's, or a proxy)."""
        import openai

        client = self._client_with(key)
        try:
            # The body is already plain JSON built by openai_wire: posting it as it is
            # skips the SDK's per-call walk over every message and tool (which grew with
            # the history and dominated a turn's CPU), and chunks stay plain dicts.
            stream = await client.post(
                "/chat/completions",
                cast_to=dict[str, Any],
                body=params,
                options={"headers": trace_headers()},
                stream=True,
                stream_cls=openai.AsyncStream[dict[str, Any]],
            )
            async for chunk in stream:
                yield chunk
        except openai.OpenAIError as exc:
            raise self._failure(_sdk_problem(exc), key, context) from exc

    async def _lean_chunks(
        self, params: dict[str, Any], key: str | None, context: str
    ) -> AsyncIterator[dict[str, Any]]:
        """The streamed chunks through :class:`Http1Pool` (retried until the stream opens)."""
        lean = self._lean
        assert lean is not None
        body = orjson.dumps(params)  # a long history's prompt: ~15x faster than json.dumps
        headers = [self._bearer(key), *trace_headers().items()]
        async with self._lean_answer(lambda: lean.post("/chat/completions", body, headers), key, context) as answer:
            async for data in sse_data(answer.chunks()):
                if data != "[DONE]":  # read on to the end, so that the connection is kept
                    chunk = _chunk_of(data)
                    if isinstance(chunk, UpstreamProblem):
                        raise self._failure(chunk, key, context)
                    yield chunk

    async def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        """Vectors of ``texts`` from the server's ``/embeddings``, in order, a batch of inputs per request.

        Raises:
            UpstreamError: the server failed, could not be reached, or answered in another shape.
        """
        import openai

        vectors: list[list[float]] = []
        for start in range(0, len(texts), _EMBED_BATCH):
            batch = texts[start : start + _EMBED_BATCH]
            body = {"model": model, "input": batch, "encoding_format": "float"}
            try:
                answer = await self._client.post(
                    "/embeddings", cast_to=dict[str, Any], body=body, options={"headers": trace_headers()}
                )
            except openai.OpenAIError as exc:
                raise self._failure(_sdk_problem(exc), None, f"embedding model {model} failed upstream") from exc
            vectors.extend(_vectors_of(answer, len(batch), model))
        return vectors

    def _params(self, request: ChatRequest, messages: list[Any]) -> dict[str, Any]:
        """The request's body: its ``messages`` as given (wire dicts, or what orjson encodes as theirs)."""
        sampling = request.sampling
        params: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        extra: dict[str, Any] = {}
        if request.tools:
            params["tools"] = [tool_schema(tool) for tool in request.tools]
            choice = tool_choice_param(request.tool_choice, {tool.name for tool in request.tools})
            if choice is not None:
                params["tool_choice"] = choice
        optional = {
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
            "stop": sampling.stop,
        }
        params.update({key: value for key, value in optional.items() if value is not None})
        if sampling.top_k is not None:
            extra["top_k"] = sampling.top_k
        if sampling.repetition_penalty not in (None, 1.0):
            extra["repetition_penalty"] = sampling.repetition_penalty
        response_format = response_format_param(request.response_format)
        if response_format is not None:
            params["response_format"] = response_format
        elif isinstance(request.response_format, GrammarResponseFormat):
            raise InvalidRequestError(
                "grammar response formats are not supported by OpenAI-compatible providers",
                field="response_format",
            )
        params.update(extra)
        return params

    async def passthrough(
        self, path: str, body: dict[str, Any], provider_data: dict[str, Any] | None
    ) -> dict[str, Any] | AsyncIterator[dict[str, Any]]:
        """Send an OpenAI-format request as it is; a streamed one yields its chunks.

        Raises:
            InvalidRequestError: the upstream server rejected the request (4xx).
            UpstreamError: the upstream server failed or could not be reached.
        """
        import openai

        client, key = self._client_for(provider_data)
        traced: openai.RequestOptions = {"headers": trace_headers()}
        try:
            if body.get("stream"):
                stream = await client.post(
                    path,
                    cast_to=dict[str, Any],
                    body=body,
                    options=traced,
                    stream=True,
                    stream_cls=openai.AsyncStream[dict[str, Any]],
                )
                return self._relay(stream, key)
            result = await client.post(path, cast_to=dict[str, Any], body=body, options=traced)
            return result
        except openai.OpenAIError as exc:
            raise self._failure(_sdk_problem(exc), key, "upstream", client_errors=True) from exc

    async def _relay(
        self, stream: openai.AsyncStream[dict[str, Any]], key: str | None
    ) -> AsyncIterator[dict[str, Any]]:
        import openai

        try:
            async for chunk in stream:
                yield chunk
        except openai.OpenAIError as exc:
            raise self._failure(_sdk_problem(exc), key, "upstream", client_errors=True) from exc

    def _failure(
        self, problem: UpstreamProblem, client_key: str | None, context: str, client_errors: bool = False
    ) -> InvalidRequestError | UpstreamError:
        """Whose fault an upstream failure is, in a message that quotes no key.

        A rejected key is the client's fault only when the client sent it (provider
        data); the key ferryman is configured with is the operator's, so its rejection
        is a server fault. A prompt the server finds too long for the model's context
        is the client's. With ``client_errors``, other 4xx answers (but 429) are
        the client's too: the request was passed through as the client wrote it.
        """
        status = problem.status
        if status in _AUTH_STATUSES:
            if client_key is not None:
                return ProviderKeyRejectedError(
                    f"the model server of provider '{self.provider_id}' rejected the API key sent in {HEADER} "
                    f"(HTTP {status})",
                    field=HEADER,
                )
            return UpstreamError(
                f"the model server of provider '{self.provider_id}' rejected the API key ferryman is configured "
                f"with (HTTP {status})"
            )
        message = scrub(scrub(f"{context}: {problem.message}", client_key), self._api_key)
        if status in _TOO_LONG_STATUSES and context_overflow(problem.message, *problem.codes):
            return ContextLengthExceededError(message)
        if client_errors and status is not None and 400 <= status < 500 and status != 429:
            return InvalidRequestError(message)
        return UpstreamError(message)

    async def aclose(self) -> None:
        """Close the HTTP connection pools."""
        if self._lean is not None:
            await self._lean.aclose()
        if self._sdk is not None:
            await self._sdk.close()


def _sdk_problem(exc: openai.OpenAIError) -> UpstreamProblem:
    """What the SDK's error says (a status error's status and codes)."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        return UpstreamProblem(exc.status_code, str(exc), (exc.code, exc.type))
    return UpstreamProblem(None, str(exc))


def _chunk_of(data: str) -> dict[str, Any] | UpstreamProblem:
    """One streamed event's chunk, or what is wrong with it (an event that carries an ``error``: a failure
    mid-stream)."""
    try:
        chunk = orjson.loads(data)
    except ValueError as exc:
        return UpstreamProblem(None, f"the model server streamed an event that is not JSON: {exc}")
    if not isinstance(chunk, dict):
        return UpstreamProblem(None, "the model server streamed an event that is no JSON object")
    if chunk.get("error"):
        error = chunk["error"]
        said = error.get("message") if isinstance(error, dict) else None
        return UpstreamProblem(None, str(said or "An error occurred during streaming"))
    return chunk


def _listed(body: bytes, where: str) -> list[tuple[str, dict[str, Any]]]:
    """The entries of a model list's ``data``, each with its id (an entry without one is skipped).

    Raises:
        UpstreamError: the list is not JSON, or larger than :data:`_MODEL_LIST_BYTES`.
    """
    if len(body) >= _MODEL_LIST_BYTES:
        raise UpstreamError(f"{where}: its model list is larger than {_MODEL_LIST_BYTES >> 20} MiB")
    try:
        listed = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise UpstreamError(f"{where}: its model list is not JSON") from None
    entries = listed.get("data") if isinstance(listed, dict) else None
    if not isinstance(entries, list):
        return []
    return [(entry["id"], entry) for entry in entries if isinstance(entry, dict) and isinstance(entry.get("id"), str)]


def _vectors_of(answer: dict[str, Any], count: int, model: str) -> list[list[float]]:
    data = answer.get("data")
    if not isinstance(data, list) or len(data) != count:
        raise UpstreamError(f"embedding model {model} answered {count} inputs with no list of {count} embeddings")
    ordered = sorted(data, key=lambda item: item.get("index", 0) if isinstance(item, dict) else 0)
    vectors = [item.get("embedding") if isinstance(item, dict) else None for item in ordered]
    if not all(isinstance(vector, list) for vector in vectors):
        raise UpstreamError(f"embedding model {model} answered without float embeddings")
    return vectors  # type: ignore[return-value]


def _chunks_of(delta: dict[str, Any]) -> list[ChatChunk]:
    pieces: list[ChatChunk] = []
    if delta.get("content"):
        pieces.append(TextChunk(delta["content"]))
    for call in delta.get("tool_calls") or []:
        function = call.get("function") or {}
        pieces.append(
            ToolCallChunk(
                index=call.get("index", 0),
                call_id=call.get("id"),
                name=function.get("name"),
                arguments=function.get("arguments") or "",
            )
        )
    return pieces
