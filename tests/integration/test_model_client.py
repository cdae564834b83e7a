"""The hot path's model client (``inference/http1.py``) against model servers on loopback that misbehave on cue.

Each server here is a raw asyncio server, so that a test decides byte for byte what the model server does:
answer chunked or sized, keep or drop an idle connection, refuse, stall, or fail mid-stream. The provider is
built as ``ferryman serve`` builds it (no HTTP client of the caller's), so its streamed chats take the lean path.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from ferryman.api.content import CompletionMessage, Message, ToolCall, ToolResponseMessage, UserMessage
from ferryman.errors import ContextLengthExceededError, ProviderKeyRejectedError, UpstreamError
from ferryman.inference.base import ChatChunk, ChatRequest, FinishChunk, TextChunk
from ferryman.inference.openai_remote import OpenAICompatibleProvider

pytestmark = pytest.mark.anyio

OPERATOR_KEY = "sk-operator-0123456789"
CLIENT_KEY = "sk-client-9876543210"


@dataclass
class Received:
    """One request the server read: its head (lines) and body."""

    head: list[str]
    body: bytes

    def header(self, name: str) -> str | None:
        """The value of a header, by its name in any case."""
        for line in self.head[1:]:
            key, _, value = line.partition(":")
            if key.strip().lower() == name.lower():
                return value.strip()
        return None


@dataclass
class Server:
    """What a loopback model server saw: its requests, and how many connections it accepted."""

    port: int = 0
    requests: list[Received] = field(default_factory=list)
    connections: int = 0


Reply = Callable[[Server, asyncio.StreamWriter], Awaitable[bool]]
"""Writes one answer; returns whether to keep the connection open for the next request."""


@asynccontextmanager
async def model_server(replies: list[Reply]) -> AsyncIterator[Server]:
    """A server answering its requests, in order, with ``replies`` (the last one repeated)."""
    seen = Server()
    handlers: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.connections += 1
        handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")[:-2]
                received = Received(head, b"")
                length = int(received.header("content-length") or 0)
                received.body = await reader.readexactly(length)
                seen.requests.append(received)
                reply = replies[min(len(seen.requests), len(replies)) - 1]
                if not await reply(seen, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    seen.port = server.sockets[0].getsockname()[1]
    try:
        yield seen
    finally:
        server.close()
        for handler in handlers:
            handler.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


def _events(*chunks: object) -> bytes:
    return b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"


ANSWER = _events(
    {"choices": [{"index": 0, "delta": {"content": "The answer "}}]},
    {"choices": [{"index": 0, "delta": {"content": "is 42."}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}},
)


def chunked(body: bytes, *, keep: bool = True) -> Reply:
    """An SSE answer sent in chunks of a few bytes (split across events and lines)."""

    async def reply(_: Server, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for start in range(0, len(body), 23):
            piece = body[start : start + 23]
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return keep

    return reply


def sized(status: int, body: bytes, *headers: str) -> Reply:
    """An answer with a Content-Length."""

    async def reply(_: Server, writer: asyncio.StreamWriter) -> bool:
        extra = "".join(f"{header}\r\n" for header in headers)
        writer.write(f"HTTP/1.1 {status} X\r\ncontent-length: {len(body)}\r\n{extra}\r\n".encode() + body)
        await writer.drain()
        return True

    return reply


def provider(server: Server, *, max_retries: int = 2, timeout: float = 30.0) -> OpenAICompatibleProvider:
    base = f"http://127.0.0.1:{server.port}/v1"
    return OpenAICompatibleProvider("upstream", base, api_key=OPERATOR_KEY, max_retries=max_retries, timeout=timeout)


async def chat(model: OpenAICompatibleProvider, provider_data: dict[str, str] | None = None) -> list[ChatChunk]:
    request = ChatRequest(model="m", messages=[UserMessage(content="hi")], provider_data=provider_data)
    return [chunk async for chunk in model.stream_chat(request)]


async def test_a_streamed_chat_is_translated_and_its_connection_kept_for_the_next() -> None:
    async with model_server([chunked(ANSWER)]) as server:
        model = provider(server)
        try:
            for _ in range(3):
                chunks = await chat(model)
                assert "".join(c.text for c in chunks if isinstance(c, TextChunk)) == "The answer is 42."
                finish = chunks[-1]
                assert isinstance(finish, FinishChunk) and finish.usage is not None
                assert (finish.stop_reason, finish.usage.input_tokens, finish.usage.output_tokens) == (
                    "end_of_turn", 7, 3)  # fmt: skip
        finally:
            await model.aclose()
    assert server.connections == 1
    first = server.requests[0]
    assert first.head[0] == "POST /v1/chat/completions HTTP/1.1"
    assert first.header("authorization") == f"Bearer {OPERATOR_KEY}"
    assert first.header("host") == f"127.0.0.1:{server.port}"
    sent = json.loads(first.body)
    assert sent["stream"] is True and sent["messages"] == [{"role": "user", "content": "hi"}]


async def test_a_history_sent_again_is_sent_byte_for_byte_as_a_fresh_provider_sends_it() -> None:
    call = ToolCall(call_id="c1", tool_name="f", arguments={"a": 1})
    history: list[Message] = [
        UserMessage(content="hi", context="ctx"),
        CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[call]),
        ToolResponseMessage(call_id="c1", content="ok"),
        CompletionMessage(content="The answer is 42."),
    ]
    edited = history[3].model_copy(update={"content": "The answer is 43."})
    later = [*history[:3], edited, UserMessage(content="sure?")]
    async with model_server([chunked(ANSWER)]) as server:
        warm, fresh = provider(server), provider(server)
        try:
            for model, messages in ((warm, history), (warm, later), (fresh, later)):
                request = ChatRequest(model="m", messages=messages)
                [chunk async for chunk in model.stream_chat(request)]
        finally:
            await warm.aclose()
            await fresh.aclose()
    first, again, uncached = (received.body for received in server.requests)
    assert again == uncached  # the wire forms made for the first request, used again, are what a new one makes
    assert b"The answer is 43." in again and b"The answer is 42." not in again
    assert json.loads(again)["messages"][:3] == json.loads(first)["messages"][:3]


async def test_an_idle_connection_the_server_dropped_is_replaced_without_sending_twice() -> None:
    async with model_server([chunked(ANSWER, keep=False)]) as server:
        model = provider(server, max_retries=0)
        try:
            await chat(model)
            await chat(model)  # the pooled connection is closed by now: the request goes on a new one
        finally:
            await model.aclose()
    assert (server.connections, len(server.requests)) == (2, 2)


async def test_a_refusal_to_retry_is_retried_after_the_wait_the_server_asks_for() -> None:
    busy = sized(503, b'{"error": {"message": "busy"}}', "retry-after-ms: 10")
    async with model_server([busy, chunked(ANSWER)]) as server:
        model = provider(server, max_retries=1)
        try:
            assert isinstance((await chat(model))[-1], FinishChunk)
        finally:
            await model.aclose()
    assert len(server.requests) == 2


async def test_a_refusal_once_the_retries_are_spent_quotes_the_server_like_the_sdk() -> None:
    async with model_server([sized(503, b"the model is loading")]) as server:
        model = provider(server, max_retries=0)
        with pytest.raises(UpstreamError) as failed:
            await chat(model)
        await model.aclose()
    assert str(failed.value) == "model m failed upstream: Error code: 503 - the model is loading"
    assert len(server.requests) == 1


async def test_a_client_error_is_not_retried_and_a_context_overflow_is_named() -> None:
    body = json.dumps({"error": {"message": "too many tokens", "code": "context_length_exceeded"}}).encode()
    async with model_server([sized(400, body)]) as server:
        model = provider(server)
        with pytest.raises(ContextLengthExceededError):
            await chat(model)
        await model.aclose()
    assert len(server.requests) == 1


async def test_a_rejected_key_is_the_clients_fault_only_when_the_client_sent_it() -> None:
    async with model_server([sized(401, b'{"error": {"message": "bad key"}}')]) as server:
        model = provider(server)
        with pytest.raises(ProviderKeyRejectedError) as theirs:
            await chat(model, {"api_key": CLIENT_KEY})
        with pytest.raises(UpstreamError) as ours:
            await chat(model)
        await model.aclose()
    assert server.requests[0].header("authorization") == f"Bearer {CLIENT_KEY}"
    for failure in (theirs.value, ours.value):
        assert CLIENT_KEY not in str(failure) and OPERATOR_KEY not in str(failure)


async def test_an_error_event_mid_stream_fails_the_call() -> None:
    events = _events({"choices": [{"index": 0, "delta": {"content": "The"}}]}, {"error": {"message": "GPU fell over"}})
    async with model_server([chunked(events)]) as server:
        model = provider(server)
        with pytest.raises(UpstreamError, match="GPU fell over"):
            await chat(model)
        await model.aclose()
    assert len(server.requests) == 1, "a stream that began is never sent again"


async def test_a_server_that_stops_answering_times_out() -> None:
    async def stall(_: Server, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        await writer.drain()
        await asyncio.Event().wait()
        return False

    async with model_server([stall]) as server:
        model = provider(server, max_retries=0, timeout=0.2)
        with pytest.raises(UpstreamError, match="Request timed out"):
            await chat(model)
        await model.aclose()


async def test_an_unreachable_server_is_a_connection_error() -> None:
    async with model_server([chunked(ANSWER)]) as server:
        port = server.port
    model = OpenAICompatibleProvider("upstream", f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(UpstreamError, match="Connection error"):
        await chat(model)
    await model.aclose()


async def test_a_sized_answer_is_read_as_well_as_a_chunked_one() -> None:
    async with model_server([sized(200, ANSWER, "content-type: text/event-stream")]) as server:
        model = provider(server)
        try:
            chunks = await chat(model)
            chunks += await chat(model)
        finally:
            await model.aclose()
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == ["The answer ", "is 42."] * 2
    assert server.connections == 1


async def test_a_server_behind_a_proxy_is_reached_through_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "")
    behind = OpenAICompatibleProvider("upstream", "http://models.internal/v1")
    assert behind._lean is None
    monkeypatch.setenv("NO_PROXY", "models.internal")
    bypassed = OpenAICompatibleProvider("upstream", "http://models.internal/v1")
    assert bypassed._lean is not None
    await behind.aclose()
    await bypassed.aclose()


MODEL_LIST = json.dumps(
    {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 8192}, {"id": "n"}, {"object": "x"}]}
).encode()


async def test_the_model_list_is_read_on_the_lean_path_and_its_connection_kept_for_chats() -> None:
    async with model_server([sized(200, MODEL_LIST), chunked(ANSWER)]) as server:
        model = provider(server)
        try:
            listed = await model.list_models()
            await chat(model)
            assert model._sdk is None  # the SDK was never needed, nor imported for this provider
        finally:
            await model.aclose()
    assert [(m.model_id, m.context.tokens if m.context else None) for m in listed] == [("m", 8192), ("n", None)]
    assert server.connections == 1
    first = server.requests[0]
    assert first.head[0] == "GET /v1/models HTTP/1.1"
    assert first.header("authorization") == f"Bearer {OPERATOR_KEY}"
    assert first.header("content-length") is None and first.body == b""


async def test_a_model_list_refused_is_retried_then_quoted_like_the_sdk() -> None:
    busy = sized(503, b"the model is loading", "retry-after-ms: 10")
    async with model_server([busy, sized(200, MODEL_LIST)]) as server:
        model = provider(server, max_retries=1)
        try:
            assert [m.model_id for m in await model.list_models()] == ["m", "n"]
        finally:
            await model.aclose()
    async with model_server([busy]) as server:
        model = provider(server, max_retries=0)
        with pytest.raises(UpstreamError) as failed:
            await model.list_models()
        await model.aclose()
    where = f"provider upstream at http://127.0.0.1:{server.port}/v1"
    assert str(failed.value) == f"{where}: Error code: 503 - the model is loading"


async def test_a_model_list_that_is_not_json_is_an_upstream_error() -> None:
    async with model_server([sized(200, b"<html>a login page</html>")]) as server:
        model = provider(server)
        with pytest.raises(UpstreamError, match="its model list is not JSON"):
            await model.list_models()
        await model.aclose()


async def test_a_stream_cut_midway_fails_the_call_without_sending_it_again() -> None:
    async def cut(_: Server, writer: asyncio.StreamWriter) -> bool:
        first = _events({"choices": [{"index": 0, "delta": {"content": "The"}}]}).split(b"data: [DONE]")[0]
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(first), first))
        await writer.drain()
        return False  # and the connection closes

    async with model_server([cut]) as server:
        model = provider(server, max_retries=2)
        with pytest.raises(UpstreamError, match="Connection error"):
            await chat(model)
        await model.aclose()
    assert len(server.requests) == 1


async def test_an_answer_that_ends_with_its_connection_is_read_whole() -> None:
    async def until_closed(_: Server, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n" + ANSWER)
        await writer.drain()
        return False

    async with model_server([until_closed]) as server:
        model = provider(server)
        try:
            chunks = await chat(model)
            chunks += await chat(model)
        finally:
            await model.aclose()
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == ["The answer ", "is 42."] * 2
    assert server.connections == 2
