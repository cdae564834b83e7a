"""The shipped SmolLM2 under a tool-call grammar: a required call comes out well-formed.

Also a smoke run of the tool-use evaluation (``bench/tool_use.py``) at one case per kind:
it checks the harness, never a score.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from bench import tool_use

from embedded_support import provider_on
from ferryman.api.content import ToolDef, UserMessage
from ferryman.inference.base import ChatRequest, FinishChunk, Sampling, ToolCallChunk
from ferryman.inference.embedded import EmbeddedProvider, installed_runtimes

pytestmark = pytest.mark.integration

CALCULATOR = ToolDef(
    name="calculator",
    description="Evaluate an arithmetic expression",
    input_schema={"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
)
WEATHER = ToolDef(
    name="get_weather",
    description="Get the current weather of a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture(scope="module", params=installed_runtimes() or ["xllamacpp"])
def provider(request: pytest.FixtureRequest) -> Iterator[EmbeddedProvider]:
    """The shipped model on each installed runtime: both must honour ``params["grammar"]``."""
    yield from provider_on(request.param)


@pytest.mark.anyio
@pytest.mark.parametrize("choice", ["required", "calculator"])
async def test_a_required_call_is_well_formed(provider: EmbeddedProvider, choice: str) -> None:
    request = ChatRequest(
        model=provider.model_id,
        messages=[UserMessage(content="Compute 987 + 654.")],
        tools=[WEATHER, CALCULATOR] if choice == "required" else [CALCULATOR],
        tool_choice=choice,
        sampling=Sampling(temperature=0.0, max_tokens=64),
    )
    async with asyncio.timeout(120):
        chunks = [chunk async for chunk in provider.stream_chat(request)]
    calls = [chunk for chunk in chunks if isinstance(chunk, ToolCallChunk)]
    assert len(calls) == 1, chunks
    assert calls[0].name in ("calculator", "get_weather")
    arguments = json.loads(calls[0].arguments)
    assert set(arguments) == {"expression" if calls[0].name == "calculator" else "city"}
    assert all(isinstance(value, str) for value in arguments.values())
    finish = chunks[-1]
    assert isinstance(finish, FinishChunk) and finish.stop_reason == "end_of_message"


@pytest.mark.anyio
async def test_the_tool_use_evaluation_runs_one_case_of_each_kind(provider: EmbeddedProvider) -> None:
    data = tool_use.load_cases()
    assert len(data["call"]) + len(data["none"]) >= 20 and len(data["followup"]) >= 5
    data["none"] = []  # keeps the smoke run short: the call and follow-up paths are the ones that parse
    report = await tool_use.evaluate(provider, data, limit=1)
    assert [result.kind for result in report.results] == ["call", "followup", "forced"]
    scores = report.scores()
    assert scores["all"][1] == 2 and scores["forced"][1] == 1
    assert json.loads(json.dumps(report.as_json()))["model"] == provider.model_id
    assert "tool-use evaluation of" in report.table()
