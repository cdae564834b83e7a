"""Where a model's context size comes from, how a prompt is measured against it, and which refusals say so."""

from __future__ import annotations

import json

import httpx
import pytest

from ferryman.api.content import CompletionMessage, ToolCall, ToolDef, UserMessage
from ferryman.api.registry import Model
from ferryman.errors import ContextLengthExceededError
from ferryman.inference.base import ChatRequest, PromptSize, Sampling
from ferryman.inference.chat_template import ChatTemplate
from ferryman.inference.context import check_context, context_overflow, estimate_prompt_tokens, published_context
from ferryman.inference.router import ModelRouter
from ferryman.inference.xllamacpp_source import XllamacppSource
from ferryman.testing import Script, ScriptedModel
from inprocess import scripted_provider

pytestmark = pytest.mark.anyio


def _declared(model_id: str, provider_id: str, resource: str, context_length: int | None = None) -> Model:
    metadata = {} if context_length is None else {"context_length": context_length}
    return Model(identifier=model_id, provider_id=provider_id, provider_resource_id=resource, metadata=metadata)


async def test_the_provider_list_wins_then_the_models_metadata_then_the_providers_setting() -> None:
    published = ScriptedModel("published", ("listed",), context_length=4096)
    configured = scripted_provider(Script(), ("plain",), "configured")
    configured.context_length = 1024
    silent = scripted_provider(Script(), ("quiet",), "silent")
    router = ModelRouter(
        [published, configured, silent],
        [
            _declared("alias", "published", "listed", context_length=100),
            _declared("sized", "configured", "plain", context_length=2000),
        ],
    )
    await router.refresh()
    windows = {m: router.context_window(m) for m in ("listed", "alias", "sized", "plain", "quiet", "unknown")}
    assert {m: w.tokens if w else None for m, w in windows.items()} == {
        "listed": 4096,
        "alias": 4096,  # the server knows its model better than a declaration does
        "sized": 2000,
        "plain": 1024,
        "quiet": None,
        "unknown": None,
    }
    assert windows["sized"] is not None and windows["sized"].source == "metadata.context_length of model 'sized'"
    assert windows["plain"] is not None and windows["plain"].source == (
        "providers[].context_length of provider 'configured'"
    )
    await router.aclose()


def test_a_published_size_is_a_positive_integer_in_one_of_the_known_fields() -> None:
    assert published_context({"id": "m", "max_model_len": 8192}) == (8192, "max_model_len")
    assert published_context({"context_length": 131072}) == (131072, "context_length")
    assert published_context({"context_window": 32768}) == (32768, "context_window")
    assert published_context({"max_model_len": True, "context_length": 0, "context_window": "4096"}) is None


@pytest.mark.parametrize(
    ("detail", "codes", "overflow"),
    [
        ("This model's maximum context length is 8192 tokens. However, your messages resulted in 9000", (), True),
        ("The decoder prompt (length 5000) is longer than the maximum model length of 4096.", (), True),
        ("request (2230 tokens) exceeds the available context size (2048 tokens)", (), True),
        ("Requested tokens (2230) exceed context window of 2048", (), True),
        ("prompt is too long: 210000 tokens > 200000 maximum", (), True),
        ("Please reduce the length of the messages.", ("context_length_exceeded",), True),
        ("bad request", (400, "exceed_context_size_error"), True),
        ("Invalid schema for function 'get_weather'", (None, "invalid_request_error"), False),
        ("temperature must be at most 2", (), False),
    ],
)
def test_context_length_refusals_are_told_from_other_bad_requests(
    detail: str, codes: tuple[object, ...], overflow: bool
) -> None:
    assert context_overflow(detail, *codes) is overflow


def test_the_estimate_counts_every_text_the_model_reads_and_rounds_up() -> None:
    call = ToolCall(call_id="c", tool_name="lookup", arguments={"q": "x"}, arguments_json='{"q": "x"}')
    tool = ToolDef(name="lookup", description="Look it up", input_schema={"type": "object"})
    request = ChatRequest(
        "m",
        [
            UserMessage(content="a" * 60, context="b" * 6),
            CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[call]),
        ],
        tools=[tool],
    )
    schema_chars = len('{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}, ') + len(
        '"description": "Look it up"}}'
    )
    chars = 60 + 6 + len("lookup") + len('{"q": "x"}') + schema_chars
    assert estimate_prompt_tokens(request).tokens == -(-chars // 6)


async def test_max_tokens_that_leave_no_room_for_a_prompt_are_refused_naming_max_tokens() -> None:
    router = ModelRouter([ScriptedModel(context_length=512)])
    await router.refresh()
    request = ChatRequest("scripted-model", [UserMessage(content="hi")], sampling=Sampling(max_tokens=512))
    with pytest.raises(ContextLengthExceededError) as refused:
        await check_context(router, request)
    assert refused.value.field == "max_tokens" and "max_tokens 512 leaves no room" in refused.value.message
    await check_context(router, ChatRequest("scripted-model", [UserMessage(content="hi")]))  # fits
    await router.aclose()


def test_a_prompt_is_not_taken_to_fit_by_its_bytes_when_its_tokens_may_outnumber_them() -> None:
    # SentencePiece as llama.cpp runs it: BOS, then a space put before the text, then the text's one byte
    # (a byte-fallback token): three tokens for a prompt of one byte, more than "one token per byte" allows.
    asked: list[str] = []

    def tokenize(request: httpx.Request) -> httpx.Response:
        asked.append(json.loads(request.content)["content"])
        return httpx.Response(200, json={"tokens": [1, 29871, 13]})

    source = XllamacppSource(None)
    source._server = object()  # type: ignore[assignment]  # loaded, as far as counting goes
    source._template = ChatTemplate(source="{{ messages[0]['content'] }}", longest_token=16)
    source._tokenizer = httpx.Client(transport=httpx.MockTransport(tokenize), base_url="http://llama.cpp")
    params = {"messages": [{"role": "user", "content": "\n"}]}
    try:
        size = source.prompt_size(params, budget=2)
        assert (size.tokens, size.at_least, asked) == (3, False, ["\n"])  # counted, and over the budget
        far_under = source.prompt_size(params, budget=100)
        assert far_under.tokens <= 100 and asked == ["\n"]  # no tokenizing needed
    finally:
        source._tokenizer.close()


class _Counting(ScriptedModel):
    """A provider that counts prompts itself (as the embedded runtime does): always 7 tokens."""

    async def count_prompt_tokens(self, request: ChatRequest, budget: int) -> PromptSize:
        return PromptSize(7, "counted")


async def test_a_prompt_is_counted_by_the_provider_it_is_routed_to_whatever_shares_its_id() -> None:
    from ferryman.inference.openai_remote import OpenAICompatibleProvider

    counting = _Counting("dup")
    remote = OpenAICompatibleProvider("dup", "http://127.0.0.1:9/v1", None, 1.0, 0)
    router = ModelRouter([counting, remote], [_declared("m", "dup", "m")])  # a declared model: the last "dup"
    await router.refresh()  # the remote's listing fails (logged); the counting one lists "scripted-model"
    declared = ChatRequest("m", [UserMessage(content="hi")])
    assert await router.prompt_size(declared, 100) == estimate_prompt_tokens(declared)
    assert await router.prompt_size(ChatRequest("scripted-model", [UserMessage(content="hi")]), 100) == PromptSize(
        7, "counted"
    )
    await router.aclose()
