"""The embedded model's own context and tokenizer decide which prompts it is given (the real SmolLM2)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from embedded_support import provider_on, shipped_model
from ferryman.api.content import UserMessage
from ferryman.errors import ContextLengthExceededError
from ferryman.inference.base import ChatRequest
from ferryman.inference.embedded import DEFAULT_MODEL_ID, EmbeddedProvider, installed_runtimes
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from inprocess import migrated_sqlite, serving

pytestmark = pytest.mark.anyio

TEXT = "The ferry leaves the harbour at seven, calls at the island at nine and is back by noon. " * 14
"""About 300 tokens of the model's tokenizer, in 1.2 kB."""


@pytest.fixture(scope="module", params=installed_runtimes() or ["xllamacpp"])
def runtime(request: pytest.FixtureRequest) -> Iterator[str]:
    yield request.param


@pytest.fixture()
def provider(runtime: Any) -> Iterator[EmbeddedProvider]:
    """The shipped model with its default context, 2048 tokens."""
    yield from provider_on(runtime)


@pytest.fixture()
async def http(tmp_path: Path, provider: EmbeddedProvider) -> AsyncIterator[httpx.AsyncClient]:
    services = build_services(SqliteStore(migrated_sqlite(tmp_path / "embedded.db")), [provider], sole_process=True)
    async with serving(services) as client:
        yield client


async def _turn(http: httpx.AsyncClient, text: str, max_tokens: int) -> httpx.Response:
    config = {
        "model": DEFAULT_MODEL_ID,
        "instructions": "Answer in one word.",
        "sampling_params": {"strategy": {"type": "greedy"}, "max_tokens": max_tokens},
    }
    agent_id = (await http.post("/v1/agents", json={"agent_config": config})).json()["agent_id"]
    session_id = (await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})).json()["session_id"]
    body = {"messages": [{"role": "user", "content": text}], "stream": False}
    return await http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body, timeout=120)


async def test_the_prompt_is_counted_by_the_models_tokenizer_as_the_runtime_counts_it(http: httpx.AsyncClient) -> None:
    # 1900 of the 2048 tokens kept for the answer leave 148 for the prompt: too few for this one.
    refused = await _turn(http, TEXT, max_tokens=1900)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert (error["context_length"], error["answer_tokens"]) == (2048, 1900)
    assert "providers[].context_length" in error["context_source"]
    assert "counted with the model's own tokenizer" in error["message"]

    answered = await _turn(http, TEXT, max_tokens=2)
    assert answered.status_code == 200, answered.text
    [step] = answered.json()["steps"]
    assert step["usage"]["input_tokens"] == error["prompt_tokens"]  # llama.cpp's own count of the same prompt


async def test_a_prompt_far_over_the_context_is_refused_without_tokenizing_it(http: httpx.AsyncClient) -> None:
    refused = await _turn(http, TEXT * 300, max_tokens=16)  # 370 kB
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == "context_length_exceeded" and error["prompt_tokens"] > 2048
    assert "at least" in error["message"]


async def test_the_runtimes_own_refusal_is_a_context_failure_not_an_upstream_one(runtime: Any) -> None:
    shipped_model(runtime)
    small = EmbeddedProvider(n_ctx=256, runtime=runtime)
    try:
        request = ChatRequest(DEFAULT_MODEL_ID, [UserMessage(content=TEXT)])
        with pytest.raises(ContextLengthExceededError):
            async with asyncio.timeout(60):
                async for _ in small.stream_chat(request):
                    pass
    finally:
        await small.aclose()
