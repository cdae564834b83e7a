"""Double-texting on one server: a turn sent while another runs in its session (issue #27, item 3).

``reject`` (the default) refuses it with 409; ``enqueue`` stores it ``queued`` and runs it once
the running one ended, in order; ``interrupt`` cancels the running one (its completed steps
kept) and runs next; ``rollback`` cancels the running one and deletes it. The scripted model's
prompts show what each turn read. Each test runs on every storage backend.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from integration_helpers import message_text, turn_url, user
from storage_backends import unopened_store

from ferryman.server.app import build_services
from ferryman.testing import Script, ScriptedReply
from ferryman.testing.scripted import ScriptedToolCall
from inprocess import agent_and_session, scripted_provider, serving

pytestmark = pytest.mark.anyio

WAIT_SECONDS = 20


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def app(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Script]]:
    script = Script()
    async with unopened_store(request.param, tmp_path) as store:
        services = build_services(store, [scripted_provider(script)], sole_process=True)
        async with serving(services) as http:
            yield http, script
    script.check()


def _texts(request: dict[str, Any]) -> list[str]:
    return [message_text(m) for m in request["messages"] if m["role"] in ("user", "assistant") and message_text(m)]


async def _turn(http: httpx.AsyncClient, url: str, text: str, **extra: Any) -> dict[str, Any]:
    answer = await http.post(url, json={"messages": [user(text)], "stream": False, **extra})
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


async def _frames(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The data of a streamed POST's frames (the in-process transport hands the body over once it ended)."""
    answer = await http.post(url, json=body)
    assert answer.status_code == 200, answer.text
    return [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")]


async def _turns(http: httpx.AsyncClient, agent_id: str, session_id: str) -> list[dict[str, Any]]:
    session = await http.get(f"/v1/agents/{agent_id}/session/{session_id}")
    return session.json()["turns"]  # type: ignore[no-any-return]


async def test_reject_is_the_default_and_answers_409(app: tuple[httpx.AsyncClient, Script]) -> None:
    http, script = app
    agent_id, session_id = await agent_and_session(http)
    url = turn_url(agent_id, session_id)
    script.enqueue(ScriptedReply(text="first", gate="first"))
    first = asyncio.create_task(_turn(http, url, "one"))
    await script.wait_for_requests(1)
    refused = await http.post(url, json={"messages": [user("two")], "multitask_strategy": "reject"})
    assert refused.status_code == 409, refused.text
    assert (await http.post(url, json={"messages": [user("two")]})).status_code == 409
    script.open_gate("first")
    assert (await first)["status"] == "completed"


async def test_enqueued_turns_wait_queued_then_run_in_order(app: tuple[httpx.AsyncClient, Script]) -> None:
    http, script = app
    agent_id, session_id = await agent_and_session(http)
    url = turn_url(agent_id, session_id)
    script.enqueue(ScriptedReply(text="first", gate="first"), ScriptedReply(text="second"), ScriptedReply(text="third"))
    first = asyncio.create_task(_turn(http, url, "one"))
    await script.wait_for_requests(1)

    body = {"messages": [user("two")], "stream": True, "multitask_strategy": "enqueue"}
    second = asyncio.create_task(_frames(http, url, body))
    async with asyncio.timeout(WAIT_SECONDS):
        while len(await _turns(http, agent_id, session_id)) < 2:  # each read yields to the request's task
            pass
    third = asyncio.create_task(_turn(http, url, "three", multitask_strategy="enqueue"))
    async with asyncio.timeout(WAIT_SECONDS):
        while len(turns := await _turns(http, agent_id, session_id)) < 3:
            pass
    assert [t["status"] for t in turns] == ["in_progress", "queued", "queued"]
    assert len(script.requests) == 1, "a queued turn calls no model"

    script.open_gate("first")
    frames = await second
    kinds = [frame["event"]["payload"]["event_type"] for frame in frames]
    assert kinds[0] == "turn_start" and kinds[-1] == "turn_complete", kinds
    assert (await first)["status"] == "completed"
    assert (await third)["status"] == "completed"
    second_prompt, third_prompt = script.requests[1], script.requests[2]
    assert _texts(second_prompt) == ["one", "first", "two"]
    assert _texts(third_prompt) == ["one", "first", "two", "second", "three"]
    assert [t["status"] for t in await _turns(http, agent_id, session_id)] == ["completed"] * 3


async def test_interrupt_cancels_the_running_turn_keeping_its_steps(app: tuple[httpx.AsyncClient, Script]) -> None:
    http, script = app
    created = await http.post(
        "/v1/agents",
        json={
            "agent_config": {"model": "scripted-model", "instructions": "Be brief.", "toolgroups": ["builtin::math"]}
        },
    )
    agent_id = created.json()["agent_id"]
    session = await http.post(f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
    session_id = session.json()["session_id"]
    url = turn_url(agent_id, session_id)
    call = ScriptedToolCall(name="calculator", arguments={"expression": "6 * 7"})
    script.enqueue(ScriptedReply(tool_calls=[call]), ScriptedReply(text="never", gate="never"))
    script.enqueue(ScriptedReply(text="interrupting"))
    first = asyncio.create_task(http.post(url, json={"messages": [user("compute")], "stream": False}))
    await script.wait_for_requests(2)  # the tool ran; the second inference hangs

    second = await _turn(http, url, "never mind", multitask_strategy="interrupt")
    assert second["status"] == "completed"
    refused = await first  # a failed turn's non-streamed call answers its failure
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "cancelled", refused.text
    interrupted = (await _turns(http, agent_id, session_id))[0]
    assert interrupted["status"] == "failed" and interrupted["error"]["code"] == "cancelled"
    assert [s["step_type"] for s in interrupted["steps"]] == ["inference", "tool_execution"]
    assert _texts(script.requests[2]) == ["never mind"], "a cancelled turn is not in the history"
    script.open_gate("never")


async def test_rollback_cancels_the_running_turn_and_deletes_it(app: tuple[httpx.AsyncClient, Script]) -> None:
    http, script = app
    agent_id, session_id = await agent_and_session(http)
    url = turn_url(agent_id, session_id)
    script.enqueue(ScriptedReply(text="kept"), ScriptedReply(text="never", gate="never"))
    script.enqueue(ScriptedReply(text="instead"))
    kept = await _turn(http, url, "earlier")
    body = {"messages": [user("dropped")], "stream": True}
    dropped = asyncio.create_task(_frames(http, url, body))
    await script.wait_for_requests(2)
    dropped_id = next(t["turn_id"] for t in await _turns(http, agent_id, session_id) if t["status"] == "in_progress")

    second = await _turn(http, url, "instead please", multitask_strategy="rollback")
    assert second["status"] == "completed"
    frames = await dropped  # its stream ended with its cancellation
    assert frames[-1]["error"]["code"] == "cancelled" and frames[-1]["error"]["turn_id"] == dropped_id, frames
    turns = await _turns(http, agent_id, session_id)
    assert [t["turn_id"] for t in turns] == [kept["turn_id"], second["turn_id"]]
    assert (await http.get(f"{url}/{dropped_id}")).status_code == 404
    assert (await http.get(f"{url}/{dropped_id}/events")).status_code == 404
    assert _texts(script.requests[2]) == ["earlier", "kept", "instead please"], "the rolled back turn is gone"
    script.open_gate("never")


async def test_rollback_with_nothing_running_just_runs(app: tuple[httpx.AsyncClient, Script]) -> None:
    http, script = app
    agent_id, session_id = await agent_and_session(http)
    script.enqueue(ScriptedReply(text="one"))
    turn = await _turn(http, turn_url(agent_id, session_id), "hello", multitask_strategy="rollback")
    assert turn["status"] == "completed" and turn["output_message"]["content"] == "one"
    assert [t["turn_id"] for t in await _turns(http, agent_id, session_id)] == [turn["turn_id"]]
