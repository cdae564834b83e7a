"""The embedded provider: real generation with the shipped SmolLM2 model, and scripted token sources."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from embedded_support import provider_on
from ferryman.api.content import (
    CompletionMessage,
    Message,
    ToolCall,
    ToolDef,
    ToolParameter,
    ToolResponseMessage,
    UserMessage,
)
from ferryman.api.inference import GrammarResponseFormat, JsonSchemaResponseFormat
from ferryman.errors import ContextLengthExceededError, InvalidRequestError, UpstreamError
from ferryman.inference.base import ChatChunk, ChatRequest, FinishChunk, Sampling, TextChunk, ToolCallChunk, Usage
from ferryman.inference.embedded import (
    DEFAULT_MODEL_ID,
    EmbeddedProvider,
    StreamEnd,
    TokenSource,
    chat_params,
    default_model_path,
    installed_runtimes,
)

WEATHER = ToolDef(
    name="get_weather",
    description="Get the weather of a city",
    parameters=[ToolParameter(name="city", parameter_type="string")],
)


class ScriptedSource:
    """Yields fixed pieces instead of running a model."""

    def __init__(self, *items: str | StreamEnd, error: Exception | None = None) -> None:
        self.items = items
        self.error = error
        self.params: list[dict[str, Any]] = []

    def load(self) -> None:
        pass

    def stream(self, params: dict[str, Any]) -> Iterator[str | StreamEnd]:
        self.params.append(params)
        yield from self.items
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        pass


class RecordingSource:
    """Wraps the real source, recording when each request starts and ends and how many pieces it made."""

    def __init__(self, inner: TokenSource) -> None:
        self.inner = inner
        self.events: list[tuple[str, str]] = []
        self.pieces: Counter[str] = Counter()

    def load(self) -> None:
        self.inner.load()

    def stream(self, params: dict[str, Any]) -> Iterator[str | StreamEnd]:
        tag = params["messages"][-1]["content"]
        self.events.append(("start", tag))
        try:
            for item in self.inner.stream(params):
                self.pieces[tag] += 1
                yield item
        finally:
            self.events.append(("end", tag))

    def close(self) -> None:
        pass  # the module's provider owns the model


class EndlessSource(ScriptedSource):
    """Never stops on its own: only cancellation ends it."""

    def stream(self, params: dict[str, Any]) -> Iterator[str | StreamEnd]:
        while True:
            time.sleep(0.001)
            yield "x"


@pytest.fixture(scope="module", params=installed_runtimes() or ["xllamacpp"])
def real(request: pytest.FixtureRequest) -> Iterator[EmbeddedProvider]:
    """One provider over the shipped model per installed runtime; it loads lazily on first use."""
    yield from provider_on(request.param)


def _request(text: str = "Say hi", max_tokens: int = 8, tools: tuple[ToolDef, ...] = ()) -> ChatRequest:
    sampling = Sampling(temperature=0.0, max_tokens=max_tokens)
    return ChatRequest(DEFAULT_MODEL_ID, [UserMessage(content=text)], tools=list(tools), sampling=sampling)


async def _collect(provider: EmbeddedProvider, request: ChatRequest) -> list[ChatChunk]:
    async with asyncio.timeout(60):
        return [chunk async for chunk in provider.stream_chat(request)]


@pytest.mark.anyio
async def test_short_greedy_generation_returns_text_and_usage(real: EmbeddedProvider) -> None:
    chunks = await _collect(real, _request())
    *texts, finish = chunks
    assert isinstance(finish, FinishChunk) and finish.stop_reason in ("out_of_tokens", "end_of_turn")
    assert "".join(c.text for c in texts if isinstance(c, TextChunk)).strip()
    assert finish.usage is not None and finish.usage.input_tokens > 5 and 0 < finish.usage.output_tokens <= 8


@pytest.mark.anyio
async def test_text_streams_as_several_deltas_before_the_finish(real: EmbeddedProvider) -> None:
    chunks = await _collect(real, _request())
    assert all(isinstance(chunk, TextChunk) for chunk in chunks[:-1])
    assert len(chunks) - 1 >= 3
    assert isinstance(chunks[-1], FinishChunk)


@pytest.mark.anyio
async def test_history_with_tool_calls_and_results_passes_the_gguf_template(real: EmbeddedProvider) -> None:
    call = ToolCall(call_id="c1", tool_name="get_weather", arguments={"city": "Paris"})
    messages: list[Message] = [
        UserMessage(content="Weather in Paris?"),
        CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[call]),
        ToolResponseMessage(call_id="c1", content="Sunny, 21 C"),
    ]
    request = ChatRequest(model=DEFAULT_MODEL_ID, messages=messages, sampling=Sampling(temperature=0.0, max_tokens=2))
    chunks = await _collect(real, request)
    assert isinstance(chunks[-1], FinishChunk)


@pytest.mark.anyio
async def test_concurrent_requests_are_served_one_at_a_time_in_arrival_order(real: EmbeddedProvider) -> None:
    recorder = RecordingSource(real.source)
    provider = EmbeddedProvider(source=recorder)
    prompts = [f"Say hi to number {i}" for i in range(3)]
    results = await asyncio.gather(*(_collect(provider, _request(prompt, max_tokens=4)) for prompt in prompts))
    await provider.aclose()
    assert all(isinstance(chunks[-1], FinishChunk) for chunks in results)
    assert recorder.events == [(kind, prompt) for prompt in prompts for kind in ("start", "end")]


@pytest.mark.anyio
async def test_leaving_a_stream_early_stops_generation_and_frees_the_worker(real: EmbeddedProvider) -> None:
    recorder = RecordingSource(real.source)
    provider = EmbeddedProvider(source=recorder)
    long = "Write a very long story about a dragon."
    async for chunk in provider.stream_chat(_request(long, max_tokens=300)):
        assert isinstance(chunk, TextChunk)
        break
    chunks = await _collect(provider, _request())
    await provider.aclose()
    assert isinstance(chunks[-1], FinishChunk)
    assert recorder.events == [("start", long), ("end", long), ("start", "Say hi"), ("end", "Say hi")]
    assert recorder.pieces[long] < 30


@pytest.mark.anyio
async def test_cancelling_the_consuming_task_stops_generation(real: EmbeddedProvider) -> None:
    recorder = RecordingSource(real.source)
    provider = EmbeddedProvider(source=recorder)
    first = asyncio.Event()

    async def consume() -> None:
        async for _ in provider.stream_chat(_request("Write a very long poem.", max_tokens=300)):
            first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    chunks = await _collect(provider, _request())
    await provider.aclose()
    assert isinstance(chunks[-1], FinishChunk)
    assert recorder.pieces["Write a very long poem."] < 30


@pytest.mark.anyio
async def test_a_tool_call_in_the_output_becomes_a_tool_call_chunk() -> None:
    source = ScriptedSource(
        "<tool",
        '_call>{"name":"get_weather",',
        '"arguments":{"city":"Paris"}}</tool_',
        "call>",
        StreamEnd("stop", Usage(40, 20)),
    )
    provider = EmbeddedProvider(source=source)
    chunks = await _collect(provider, _request("Weather in Paris?", tools=(WEATHER,)))
    await provider.aclose()
    call, finish = chunks
    assert isinstance(call, ToolCallChunk) and call.call_id and call.call_id.startswith("call_")
    assert (call.index, call.name, call.arguments) == (0, "get_weather", '{"city": "Paris"}')
    assert finish == FinishChunk(stop_reason="end_of_message", usage=Usage(40, 20))
    system = source.params[0]["messages"][0]
    assert system["role"] == "system" and '"name": "get_weather"' in system["content"]


@pytest.mark.anyio
async def test_length_finish_is_out_of_tokens_and_source_errors_are_upstream_errors() -> None:
    provider = EmbeddedProvider(source=ScriptedSource("a", "b", StreamEnd("length")))
    assert await _collect(provider, _request()) == [TextChunk("a"), TextChunk("b"), FinishChunk("out_of_tokens")]
    provider.source = ScriptedSource("a", error=ValueError("failed to decode"))
    with pytest.raises(UpstreamError, match="failed to decode"):
        await _collect(provider, _request())
    # llama-cpp-python's refusal of a prompt longer than its context is the client's: a 400, not a 502.
    provider.source = ScriptedSource("a", error=ValueError("Requested tokens (2230) exceed context window of 2048"))
    with pytest.raises(ContextLengthExceededError, match="exceed context window"):
        await _collect(provider, _request())
    await provider.aclose()
    with pytest.raises(UpstreamError, match="closed"):
        await _collect(provider, _request())


@pytest.mark.anyio
async def test_closing_the_provider_stops_a_running_generation() -> None:
    provider = EmbeddedProvider(source=EndlessSource())
    stream = provider.stream_chat(_request())
    async with asyncio.timeout(10):
        assert await anext(stream) == TextChunk("x")
        await provider.aclose()
        with pytest.raises(UpstreamError, match="closed during generation"):
            async for chunk in stream:
                assert chunk == TextChunk("x")


def test_sampling_and_response_format_map_to_llama_cpp_arguments() -> None:
    sampling = Sampling(temperature=0.5, top_p=0.9, top_k=5, repetition_penalty=1.2, stop=["END"])
    schema = {"type": "object"}
    request = ChatRequest(
        model="m",
        messages=[UserMessage(content="hi")],
        tools=[WEATHER],
        tool_choice="none",
        sampling=sampling,
        response_format=JsonSchemaResponseFormat(json_schema=schema),
    )
    assert chat_params(request) == {
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "max_tokens": 512,
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 5,
        "repeat_penalty": 1.2,
        "stop": ["END"],
        "response_format": {"type": "json_object", "schema": schema},
    }
    grammar = ChatRequest(model="m", messages=[], response_format=GrammarResponseFormat(bnf={}))
    with pytest.raises(InvalidRequestError):
        chat_params(grammar)


@pytest.mark.anyio
async def test_model_ids_and_the_default_model_file() -> None:
    path = default_model_path()
    assert path is None or path.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert EmbeddedProvider().model_id == DEFAULT_MODEL_ID
    custom = EmbeddedProvider(model_path="/models/tiny-llama.Q8_0.gguf")
    assert [info.model_id for info in await custom.list_models()] == ["tiny-llama.Q8_0"]
    await custom.aclose()
