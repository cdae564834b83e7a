"""An agent's memory never outgrows its model's context: the memory tool refuses past its share, memory shown cut.

The scripted model publishes a context of :data:`CONTEXT` tokens (the default embedded model's) and holds
each prompt to it: a prompt ferryman sent over it fails the test (``script.overflows``). The memory section
may take ``memory.max_context_share`` (a quarter) of it, about 3,000 characters by the model's estimate of six
characters a token, while the per-block and total limits allow far more.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ferryman.config import MemorySettings
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from inprocess import check_script, migrated_sqlite, serving

pytestmark = pytest.mark.anyio

CONTEXT = 2048
SHARE = 0.25
LIMITS = MemorySettings(max_block_chars=5_000, max_blocks=16, max_total_chars=16_000, max_context_share=SHARE)
FACT = "The user keeps bees and sells honey at the Saturday market. " * 40
"""2,440 characters: one fits the memory's share of the context, two do not."""


@pytest.fixture()
def model(request: pytest.FixtureRequest) -> Iterator[ScriptedModel]:
    scripted = ScriptedModel(context_length=CONTEXT)
    yield scripted
    check_script(request, scripted.script)


@pytest.fixture()
async def http(tmp_path: Path, model: ScriptedModel) -> AsyncIterator[httpx.AsyncClient]:
    store = SqliteStore(migrated_sqlite(tmp_path / "memory.db"))
    async with serving(build_services(store, [model], sole_process=True, memory=LIMITS)) as client:
        yield client


async def _agent(http: httpx.AsyncClient, toolgroups: list[str]) -> str:
    config = {"model": "scripted-model", "instructions": "Be brief.", "toolgroups": toolgroups}
    created = await http.post("/v1/agents", json={"agent_config": config})
    assert created.status_code == 200, created.text
    return str(created.json()["agent_id"])


async def _turn(http: httpx.AsyncClient, agent_id: str, text: str) -> dict[str, Any]:
    """A turn in a new session of the agent, which must complete."""
    opened = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
    url = f"/v1/agents/{agent_id}/session/{opened.json()['session_id']}/turn"
    answered = await http.post(url, json={"messages": [{"role": "user", "content": text}], "stream": False})
    assert answered.status_code == 200, answered.text
    turn: dict[str, Any] = answered.json()
    assert turn["status"] == "completed", turn
    return turn


def _system(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


async def test_an_agent_filling_its_memory_keeps_running_turns_on_a_small_context(
    http: httpx.AsyncClient, model: ScriptedModel
) -> None:
    agent_id = await _agent(http, ["builtin::memory"])
    results = []
    for number in range(6):  # the block and total limits would take all six: the context's share takes one
        append = {"operation": "append", "label": f"notes-{number}", "text": FACT}
        model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="memory", arguments=append)]))
        model.enqueue(ScriptedReply(text="Noted."))
        turn = await _turn(http, agent_id, f"Remember this, part {number}.")
        step = next(s for s in turn["steps"] if s["step_type"] == "tool_execution")
        results.append(step["tool_responses"][0]["content"])
    assert results[0] == "memory block 'notes-0' is now at version 1"
    assert all("memory.max_context_share" in result for result in results[1:]), results
    assert "shorten your memory blocks" in results[1]
    blocks = (await http.get(f"/v1/agents/{agent_id}/memory")).json()["data"]
    assert [block["label"] for block in blocks] == ["notes-0"]

    model.enqueue(ScriptedReply(text="You keep bees."))
    await _turn(http, agent_id, "What do you know about me?")
    assert FACT.strip() in _system(model.requests[-1])
    assert model.script.overflows == [] and model.refused == []


async def test_memory_written_past_the_share_is_shown_cut_and_the_turn_still_runs(
    http: httpx.AsyncClient, model: ScriptedModel
) -> None:
    agent_id = await _agent(http, [])
    for label in ("first", "second", "third", "fourth", "fifth"):  # 12,200 characters: within the API's limits
        written = await http.put(f"/v1/agents/{agent_id}/memory/{label}", json={"value": FACT})
        assert written.status_code == 200, written.text
    model.enqueue(ScriptedReply(text="Bees."))
    await _turn(http, agent_id, "What do I keep?")
    system = _system(model.requests[-1])
    assert "memory.max_context_share" in system and "characters are not shown" in system
    assert FACT[:2000] in system  # the earliest blocks are shown first; later ones are cut
    assert '<memory_block label="fifth">' in system
    assert len(system) <= CONTEXT * SHARE * 6
    assert model.script.overflows == [] and model.refused == []
