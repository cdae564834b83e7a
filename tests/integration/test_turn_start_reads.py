"""A turn's start reads the agent's memory blocks in its own trip, then checks the prompt fits, on every backend.

When the prompt with the blocks it found does not fit the model's context, the turn (stored, never run) is
removed and refused: nothing is left, the session takes the next turn, and a repeat of a keyed request gets
the refusal kept. On Redis the start and the read go in one pipeline, also when the server forgot its scripts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from storage_backends import BACKENDS, unopened_store

from ferryman.server.app import build_services
from ferryman.storage.redis.script import Scripts
from ferryman.testing import ScriptedModel, ScriptedReply
from inprocess import check_script, serving

pytestmark = pytest.mark.anyio

CONTEXT = 300
"""Tokens (one per six characters, estimated): 236 for the prompt, 64 kept for the answer."""
INPUT = "x" * 1080
"""About 180 tokens: fits alone, not beside :data:`BLOCK`."""
BLOCK = "The user sails the ferry at dawn. " * 9
"""About 50 tokens, within the memory's share of the context (a quarter), so it is shown whole."""


class Served:
    def __init__(self, http: httpx.AsyncClient, model: ScriptedModel, store: Any) -> None:
        self.http, self.model, self.store = http, model, store

    async def agent_and_session(self) -> tuple[str, str]:
        config = {"model": "scripted-model", "instructions": "a"}
        agent_id = (await self.http.post("/v1/agents", json={"agent_config": config})).json()["agent_id"]
        opened = await self.http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
        return agent_id, opened.json()["session_id"]

    async def remember(self, agent_id: str, text: str) -> None:
        put = await self.http.put(f"/v1/agents/{agent_id}/memory/human", json={"value": text})
        assert put.status_code == 200, put.text

    async def turn(
        self, agent_id: str, session_id: str, text: str, headers: dict[str, str] | None = None, stream: bool = False
    ) -> httpx.Response:
        body = {"messages": [{"role": "user", "content": text}], "stream": stream}
        url = f"/v1/agents/{agent_id}/session/{session_id}/turn"
        return await self.http.post(url, json=body, headers=headers or {})

    async def turn_ids(self, agent_id: str, session_id: str) -> list[str]:
        session = await self.http.get(f"/v1/agents/{agent_id}/session/{session_id}")
        assert session.status_code == 200, session.text
        return [turn["turn_id"] for turn in session.json()["turns"]]


@pytest.fixture(params=list(BACKENDS))
async def served(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Served]:
    model = ScriptedModel(model_ids=("scripted-model",), context_length=CONTEXT)
    async with unopened_store(request.param, tmp_path) as store:
        async with serving(build_services(store, [model], sole_process=True)) as http:
            yield Served(http, model, store)
    check_script(request, model.script)


def _system(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


async def test_a_turn_shows_the_memory_blocks_its_start_read(served: Served) -> None:
    agent_id, session_id = await served.agent_and_session()
    await served.remember(agent_id, "The user's name is Ada.")
    served.model.enqueue(ScriptedReply(text="Hello, Ada."))

    answer = await served.turn(agent_id, session_id, "Who am I?")

    assert answer.status_code == 200, answer.text
    assert "The user's name is Ada." in _system(served.model.requests[-1])


async def test_blocks_written_between_turns_show_in_the_next_one(served: Served) -> None:
    agent_id, session_id = await served.agent_and_session()
    served.model.enqueue(ScriptedReply(text="I know nothing of you."), ScriptedReply(text="Hello, Ada."))
    assert (await served.turn(agent_id, session_id, "Who am I?")).status_code == 200
    assert "Ada" not in _system(served.model.requests[-1])

    await served.remember(agent_id, "The user's name is Ada.")
    assert (await served.turn(agent_id, session_id, "And now?")).status_code == 200

    assert "The user's name is Ada." in _system(served.model.requests[-1])


def _forget_scripts(monkeypatch: pytest.MonkeyPatch, store: Any) -> Callable[[], int]:
    """Answer every script of ``store`` as a Redis server that restarted does (``NOSCRIPT``), until it is loaded
    again. Done on this client's side: flushing the server's script cache would reach the tests sharing the
    server in other workers (a round-trip count there would see the reloads). Returns how many were loaded since."""
    forgotten = "0" * 40
    for scripts in (store._scripts, store.kernel._scripts):
        for registered in scripts._registered.values():
            registered.sha = forgotten
    register = Scripts._register

    def unknown_at_first(self: Scripts, script: Any) -> Any:
        registered = register(self, script)
        registered.sha = forgotten
        return registered

    monkeypatch.setattr(Scripts, "_register", unknown_at_first)

    def reloaded() -> int:
        every = [*store._scripts._registered.values(), *store.kernel._scripts._registered.values()]
        return sum(registered.sha != forgotten for registered in every)

    return reloaded


@pytest.mark.parametrize("served", ["redis"], indirect=True)
async def test_a_redis_server_that_forgot_its_scripts_still_starts_the_turn_with_its_blocks(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id, session_id = await served.agent_and_session()
    await served.remember(agent_id, "The user's name is Ada.")
    reloaded = _forget_scripts(monkeypatch, served.store)
    served.model.enqueue(ScriptedReply(text="Hello, Ada."))

    answer = await served.turn(agent_id, session_id, "Who am I?")

    assert answer.status_code == 200, answer.text
    assert "The user's name is Ada." in _system(served.model.requests[-1])
    assert await served.turn_ids(agent_id, session_id) == [answer.json()["turn_id"]]
    assert reloaded() >= 2  # the start's script and the blocks' read, each answered NOSCRIPT, then loaded


async def test_a_turn_whose_blocks_overflow_the_context_is_removed_and_refused(served: Served) -> None:
    agent_id, session_id = await served.agent_and_session()
    served.model.enqueue(ScriptedReply(text="ok"))
    assert (await served.turn(agent_id, session_id, INPUT)).status_code == 200  # fits without memory
    before = await served.turn_ids(agent_id, session_id)
    await served.remember(agent_id, BLOCK)

    refused = await served.turn(agent_id, session_id, INPUT)

    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "context_length_exceeded"
    assert len(served.model.requests) == 1  # it never reached the model
    assert await served.turn_ids(agent_id, session_id) == before
    served.model.enqueue(ScriptedReply(text="ok"))
    assert (await served.turn(agent_id, session_id, "short")).status_code == 200  # the session is free


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "answered-at-once"])
async def test_a_keyed_turn_refused_after_its_start_keeps_its_refusal(served: Served, stream: bool) -> None:
    agent_id, session_id = await served.agent_and_session()
    await served.remember(agent_id, BLOCK)
    headers = {"Idempotency-Key": "overflowing-turn"}

    first = await served.turn(agent_id, session_id, INPUT, headers, stream)
    repeat = await served.turn(agent_id, session_id, INPUT, headers, stream)

    for refused in (first, repeat):
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "context_length_exceeded"
    # A streamed turn's key went in with the run, which never ran: given back, then kept with the refusal, as
    # any 4xx is kept.
    assert repeat.headers.get("idempotent-replayed") == "true"
    assert served.model.requests == []
    assert await served.turn_ids(agent_id, session_id) == []
