"""Out of the box: ``ferryman serve`` with no provider answers from the embedded model."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from integration_helpers import event_types, last_turn, post_stream, turn_url

from ferryman.inference.embedded import DEFAULT_MODEL_ID
from ferryman.inference.local_embeddings import local_embeddings_available
from support import create_session, ferryman_server, running


@pytest.fixture(scope="module")
def embedded_base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server started with no provider flags at all."""
    tmp = tmp_path_factory.mktemp("embedded")
    server, base = ferryman_server(tmp, None, tmp / "embedded.db")
    with running(server):
        yield base


def test_the_embedded_model_is_the_default(embedded_base: str) -> None:
    models = httpx.get(f"{embedded_base}/v1/models", timeout=30).json()["data"]
    chat = [(m["identifier"], m["provider_id"]) for m in models if m["model_type"] == "llm"]
    assert chat == [(DEFAULT_MODEL_ID, "embedded")]
    if local_embeddings_available():
        assert {m["identifier"] for m in models if m["model_type"] == "embedding"} == {"all-MiniLM-L6-v2"}


def test_a_streamed_turn_is_answered_by_the_embedded_model(embedded_base: str) -> None:
    config = {
        "model": DEFAULT_MODEL_ID,
        "instructions": "Answer in one short sentence.",
        "sampling_params": {"strategy": {"type": "greedy"}, "max_tokens": 12},
    }
    with httpx.Client(base_url=embedded_base, timeout=120) as http:
        agent_id = http.post("/v1/agents", json={"agent_config": config}).json()["agent_id"]
        session_id = create_session(http, agent_id)
        body = {"messages": [{"role": "user", "content": "What is the capital of France?"}], "stream": True}
        frames = post_stream(http, turn_url(agent_id, session_id), body)
    kinds = event_types(frames)
    assert kinds[0] == "turn_start" and kinds[-1] == "turn_complete"
    assert kinds.count("step_progress") >= 2
    answer = last_turn(frames)["output_message"]["content"]
    assert isinstance(answer, str) and answer.strip()


def test_openai_chat_completions_from_the_embedded_model(embedded_base: str) -> None:
    client = openai.OpenAI(base_url=f"{embedded_base}/v1", api_key="unused", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "Say hello."}]
    completion = client.chat.completions.create(model=DEFAULT_MODEL_ID, messages=messages, max_tokens=6, temperature=0)
    assert completion.choices[0].message.content and completion.usage and completion.usage.completion_tokens > 0
    stream = client.chat.completions.create(
        model=DEFAULT_MODEL_ID, messages=messages, max_tokens=6, temperature=0, stream=True
    )
    deltas = [chunk.choices[0].delta.content for chunk in stream if chunk.choices and chunk.choices[0].delta.content]
    assert len(deltas) >= 2
    assert "".join(deltas) == completion.choices[0].message.content


def test_ferryman_chat_streams_an_answer(embedded_base: str, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "ferryman.cli.main", "chat", "--url", embedded_base, "--max-tokens", "8", "Hi!"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    assert DEFAULT_MODEL_ID in result.stderr
