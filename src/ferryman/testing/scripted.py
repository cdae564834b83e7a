"""A scripted model: each request answers with the next reply a test enqueued."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, Field

from ferryman.errors import ContextLengthExceededError, UpstreamError
from ferryman.inference.base import (
    ChatChunk,
    ChatRequest,
    ContextWindow,
    FinishChunk,
    ModelInfo,
    TextChunk,
    ToolCallChunk,
    Usage,
)
from ferryman.inference.context import ANSWER_TOKENS, estimate_prompt_tokens


class ScriptedToolCall(BaseModel):
    """A tool call the scripted model will make."""

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    call_id: str | None = None

    def arguments_text(self) -> str:
        """The arguments as the JSON text a model would stream."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


class ScriptedError(BaseModel):
    """An upstream failure the scripted model will simulate.

    Attributes:
        status_code: The HTTP status the server answers with.
        message: The error's message.
        retry_after_ms: The ``retry-after-ms`` header the HTTP server sends with it (as OpenAI does), or None
            for none. Clients honour it instead of their own back-off: a test of retried failures stays fast.
    """

    status_code: int = 500
    message: str = "scripted failure"
    retry_after_ms: float | None = Field(default=1.0, ge=0)


class ScriptedReply(BaseModel):
    """One scripted answer.

    Attributes:
        text: Text to stream, split into ``chunks`` pieces.
        tool_calls: Tool calls to make after the text.
        error: Fail instead of answering.
        gate: Name of a gate to wait on before answering (see ``open_gate``).
        pause: Name of a gate the streamed answer waits on after its first ``pause_after`` text pieces
            (a reply held mid-stream; past the last piece: after the text, before any tool call).
        pause_after: How many text pieces stream before ``pause``.
        finish: Override of the finish reason (``stop``, ``length``, ``tool_calls``).
        delay: Seconds the HTTP server waits before answering (to exercise timeouts).
    """

    text: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    error: ScriptedError | None = None
    gate: str | None = None
    pause: str | None = None
    pause_after: int = Field(default=1, ge=0)
    chunks: int = Field(default=3, ge=1)
    finish: str | None = None
    delay: float = Field(default=0.0, ge=0)

    def finish_reason(self) -> str:
        """The OpenAI finish reason of this reply."""
        if self.finish:
            return self.finish
        return "tool_calls" if self.tool_calls else "stop"

    def text_pieces(self) -> list[str]:
        """The text split into at most ``chunks`` non-empty pieces."""
        if not self.text:
            return []
        size = max(1, -(-len(self.text) // self.chunks))
        return [self.text[i : i + size] for i in range(0, len(self.text), size)]


class ScriptMismatchError(AssertionError):
    """A test left scripted replies unused, or the model got a call nothing was scripted for."""


class Script:
    """The queue of replies, the requests seen, and the gates; shared by model and server.

    A script is strict: :meth:`check` fails when replies are left or a request
    came with nothing queued (and no ``default_reply``).
    """

    def __init__(self, default_reply: ScriptedReply | None = None) -> None:
        self.replies: deque[ScriptedReply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.unexpected: list[dict[str, Any]] = []
        self.overflows: list[str] = []
        """Prompts sent over the model's context by ferryman's own count (see :class:`ScriptedModel`)."""
        self.default_reply = default_reply
        self._gates: dict[str, asyncio.Event] = {}
        self._arrived = asyncio.Condition()

    def enqueue(self, *replies: ScriptedReply) -> None:
        """Append replies to the queue."""
        self.replies.extend(replies)

    def gate(self, name: str) -> asyncio.Event:
        """The gate of this name, created closed."""
        return self._gates.setdefault(name, asyncio.Event())

    def open_gate(self, name: str) -> None:
        """Let every reply waiting on this gate proceed."""
        self.gate(name).set()

    async def next_reply(self, request_record: dict[str, Any]) -> ScriptedReply:
        """Record a request and return the reply it gets, after its gate opens."""
        await self.record(request_record)
        if self.replies:
            reply = self.replies.popleft()
        elif self.default_reply is not None:
            reply = self.default_reply
        else:
            self.unexpected.append(request_record)
            raise LookupError("the scripted model has no reply queued")
        if reply.gate:
            await self.gate(reply.gate).wait()
        return reply

    async def text_stream(self, reply: ScriptedReply) -> AsyncIterator[str]:
        """The reply's text pieces, held at its ``pause`` gate after the first ``pause_after`` of them."""
        pieces = reply.text_pieces()
        for index in range(len(pieces) + 1):
            if reply.pause and index == min(reply.pause_after, len(pieces)):
                await self.gate(reply.pause).wait()
            if index < len(pieces):
                yield pieces[index]

    async def record(self, request_record: dict[str, Any]) -> None:
        """Record a request, waking those waiting for it."""
        async with self._arrived:
            self.requests.append(request_record)
            self._arrived.notify_all()

    async def wait_for_requests(self, count: int) -> list[dict[str, Any]]:
        """Every request so far, once at least ``count`` arrived (a gated one counts once it arrived)."""
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)
        return list(self.requests)

    def problems(self, allow_unused: bool = False) -> list[str]:
        """What is wrong with how the script was used: replies left (unless allowed), calls nothing answered."""
        found = (
            [] if allow_unused else [f"unused reply: {r.model_dump_json(exclude_defaults=True)}" for r in self.replies]
        )
        return (
            found
            + [f"unexpected call (no reply scripted): {json.dumps(r, default=str)[:500]}" for r in self.unexpected]
            + [f"prompt over the context: {overflow}" for overflow in self.overflows]
        )

    def check(self, allow_unused: bool = False) -> None:
        """Fail if replies are left (unless ``allow_unused``) or a call found nothing scripted.

        Raises:
            ScriptMismatchError: listing each unused reply and unexpected call.
        """
        found = self.problems(allow_unused)
        if found:
            raise ScriptMismatchError("the scripted model was not used as scripted:\n" + "\n".join(found))

    def reset(self) -> None:
        """Forget replies, requests, unexpected calls and gates."""
        self.replies.clear()
        self.requests.clear()
        self.unexpected.clear()
        self.overflows.clear()
        self._gates.clear()


class Enqueuing:
    """The ways to script replies, over one :meth:`enqueue`."""

    def enqueue(self, *replies: ScriptedReply) -> None:
        """Queue replies for the next requests."""
        raise NotImplementedError

    def enqueue_text(self, text: str, gate: str | None = None) -> None:
        """Queue a plain text answer, optionally held until ``gate`` opens."""
        self.enqueue(ScriptedReply(text=text, gate=gate))

    def enqueue_tool_call(self, name: str, arguments: dict[str, Any] | None = None) -> None:
        """Queue an answer that calls one tool."""
        self.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name=name, arguments=arguments or {})]))

    def enqueue_error(self, status_code: int = 500, message: str = "scripted failure") -> None:
        """Queue an upstream failure."""
        self.enqueue(ScriptedReply(error=ScriptedError(status_code=status_code, message=message)))


class ScriptedModel(Enqueuing):
    """An in-process inference provider that answers from a :class:`Script`.

    ``context_length``, when given, is the context size its model list publishes for each model, and the
    model holds each prompt to it as a model server does: a prompt whose tokens (ferryman's estimate,
    :func:`~ferryman.inference.context.estimate_prompt_tokens`, times ``token_ratio``) and the answer's room
    (``max_tokens``, else ``ANSWER_TOKENS``) pass it is refused with a "context length exceeded" error. One
    that passes it by ferryman's own count (ratio 1) is also kept in ``script.overflows``, which fails the
    test (:meth:`Script.check`): ferryman sent a prompt it knew was too long. A ``token_ratio`` above 1
    stands for a tokenizer that counts more than ferryman's estimate (its refusals fail no test).

    Example:
        >>> model = ScriptedModel()
        >>> model.enqueue(ScriptedReply(text="hello"))
    """

    def __init__(
        self,
        provider_id: str = "scripted",
        model_ids: tuple[str, ...] = ("scripted-model",),
        script: Script | None = None,
        context_length: int | None = None,
        token_ratio: float = 1.0,
    ) -> None:
        self.provider_id = provider_id
        self.model_ids = model_ids
        self.script = script or Script()
        self.context_length = context_length
        self.token_ratio = token_ratio
        self.refused: list[int] = []
        """The counted tokens of each prompt refused as too long."""

    def enqueue(self, *replies: ScriptedReply) -> None:
        """Queue replies for the next requests."""
        self.script.enqueue(*replies)

    def check(self, allow_unused: bool = False) -> None:
        """Fail if replies are left (unless ``allow_unused``) or a request found none (:meth:`Script.check`)."""
        self.script.check(allow_unused)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request received, as recorded by :func:`record_request`."""
        return self.script.requests

    async def list_models(self) -> list[ModelInfo]:
        """The configured model ids, with the context size when one is given."""
        if self.context_length is None:
            return [ModelInfo(model_id=model_id) for model_id in self.model_ids]
        context = ContextWindow(self.context_length, f"the model list of provider '{self.provider_id}'")
        return [ModelInfo(model_id, context=context) for model_id in self.model_ids]

    async def stream_chat(self, request: ChatRequest) -> AsyncIterator[ChatChunk]:
        """Stream the next scripted reply (or refuse a prompt over the context, see the class's text)."""
        self._hold_to_context(request)
        try:
            reply = await self.script.next_reply(record_request(request))
        except LookupError as exc:
            raise UpstreamError(str(exc)) from exc
        if reply.error is not None:
            raise UpstreamError(f"scripted failure ({reply.error.status_code}): {reply.error.message}")
        async for piece in self.script.text_stream(reply):
            yield TextChunk(piece)
        for index, call in enumerate(reply.tool_calls):
            call_id = call.call_id or f"call_{len(self.script.requests)}_{index}"
            yield ToolCallChunk(index=index, call_id=call_id, name=call.name)
            yield ToolCallChunk(index=index, arguments=call.arguments_text())
        stop = {"length": "out_of_tokens", "tool_calls": "end_of_message"}.get(reply.finish_reason(), "end_of_turn")
        yield FinishChunk(stop_reason=stop, usage=Usage(10, len(reply.text.split())))  # type: ignore[arg-type]

    def _hold_to_context(self, request: ChatRequest) -> None:
        if self.context_length is None:
            return
        answer = request.sampling.max_tokens or ANSWER_TOKENS
        estimated = estimate_prompt_tokens(request).tokens
        counted = int(estimated * self.token_ratio)
        if estimated + answer > self.context_length:
            self.script.overflows.append(f"{estimated} + {answer} tokens for the answer > {self.context_length}")
        if counted + answer > self.context_length:
            self.refused.append(counted)
            raise ContextLengthExceededError(
                f"request ({counted + answer} tokens) exceeds the available context size ({self.context_length} tokens)"
            )

    async def aclose(self) -> None:
        """Nothing to release."""


def record_request(request: ChatRequest) -> dict[str, Any]:
    """A JSON-able record of a request, for tests to assert on."""
    sampling = request.sampling
    return {
        "model": request.model,
        "messages": [message.model_dump(mode="json") for message in request.messages],
        "tools": [tool.name for tool in request.tools],
        "tool_choice": request.tool_choice,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "max_tokens": sampling.max_tokens,
        "stop": sampling.stop,
        "response_format": (request.response_format.model_dump(mode="json") if request.response_format else None),
    }
