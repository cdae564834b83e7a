"""The approval sweep on every backend: a run whose approvals were decided by a process that died before
continuing it goes on, once, on whichever replica takes it.

The dying process is played by writing what it had written before it died, with the store's own held-call
records (the decision, or also the claim of the continuation), their leases already run out, and never
continuing the run; the sweep is then looked once by hand (:meth:`ApprovalSweep.once`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from keyed_app import answered, keyed_app

from ferryman.server.app import Services
from ferryman.services import turn_starts
from ferryman.services.approval_sweep import ApprovalSweep
from ferryman.storage.domain.approvals import CONTINUED, PENDING, HeldCalls
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from inprocess import check_script
from mcp_servers import LOCAL_FETCH, RunningServer

pytestmark = pytest.mark.anyio

MODEL = "scripted-model"
LATER = 3600.0
"""Far enough ahead that every lease a run still holds has run out."""


@dataclass
class Replica:
    http: httpx.AsyncClient
    services: Services
    model: ScriptedModel
    alice: dict[str, str]
    calls: HeldCalls

    async def ok(self, method: str, url: str, status: int = 200, **kwargs: Any) -> Any:
        return await answered(self.http, method, url, self.alice, status, **kwargs)

    async def paused_turn(self) -> tuple[str, str, str, str]:
        """A turn of alice's agent holding a calculator call: agent, session, turn and approval ids."""
        config = {"model": MODEL, "instructions": "Be brief.", "toolgroups": ["builtin::math"]}
        agent = await self.ok("POST", "/v1/agents", json={"agent_config": {**config, "require_approval": "always"}})
        agent_id = agent["agent_id"]
        session_id = (await self.ok("POST", f"/v1/agents/{agent_id}/session", json={"session_name": "s"}))["session_id"]
        self.model.enqueue(
            ScriptedReply(tool_calls=[ScriptedToolCall(name="calculator", arguments={"expression": "6 * 7"})])
        )
        body = {"messages": [{"role": "user", "content": "6 * 7?"}], "stream": False}
        turn = await self.ok("POST", f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body)
        assert turn["status"] == "awaiting_input"
        [held] = (await self.ok("GET", "/v1/approvals"))["data"]
        return agent_id, session_id, turn["turn_id"], held["id"]

    async def turn_when_ended(self, agent_id: str, session_id: str, turn_id: str) -> dict[str, Any]:
        """The turn once its event stream (followed to its end, not polled) ends."""
        url = f"/v1/agents/{agent_id}/session/{session_id}/turn/{turn_id}"
        async with self.http.stream("GET", f"{url}/events", headers=self.alice) as events:
            assert events.status_code == 200
            async for _ in events.aiter_lines():
                pass
        turn: dict[str, Any] = await self.ok("GET", url)
        return turn

    async def decided_by_a_process_that_died(self, approval_id: str, *, claimed: bool = False) -> None:
        """What a process had written when it died: the decision (and, ``claimed``, the claim), leases run out."""
        gone = time.time() - 1
        assert await self.calls.decide(approval_id, True, None, gone, gone)
        if claimed:
            assert await self.calls.claim(approval_id, gone)


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def replica(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Replica]:
    scripted = ScriptedModel()
    async with keyed_app(request.param, tmp_path, scripted, ("alice",), fetch=LOCAL_FETCH) as (services, http, bearer):
        await services.approval_sweep.stop()  # this replica's own loop: the tests look by hand
        yield Replica(http, services, scripted, bearer["alice"], HeldCalls(services.store.kernel))
    check_script(request, scripted.script)


@pytest.mark.parametrize("claimed", [False, True], ids=["decided", "claimed"])
async def test_a_turn_whose_decision_outlived_its_process_is_resumed_by_the_sweep(
    replica: Replica, claimed: bool
) -> None:
    agent_id, session_id, turn_id, approval_id = await replica.paused_turn()
    await replica.decided_by_a_process_that_died(approval_id, claimed=claimed)
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn/{turn_id}"
    assert (await replica.ok("GET", url))["status"] == "awaiting_input"  # nothing else continues it

    replica.model.enqueue(ScriptedReply(text="It is 42."))
    assert await replica.services.approval_sweep.once() == 1
    done = await replica.turn_when_ended(agent_id, session_id, turn_id)
    assert done["status"] == "completed"
    [tool_step] = [s for s in done["steps"] if s["step_type"] == "tool_execution"]
    assert [r["content"] for r in tool_step["tool_responses"]] == ["42"]
    # Its leases are gone: no later look continues it again.
    assert await replica.services.approval_sweep.once(time.time() + LATER) == 0


async def test_a_continuation_that_went_on_leaves_nothing_to_the_sweep(replica: Replica) -> None:
    agent_id, session_id, turn_id, approval_id = await replica.paused_turn()
    replica.model.enqueue(ScriptedReply(text="It is 42."))
    await replica.ok("POST", f"/v1/approvals/{approval_id}/approve", status=202)
    assert (await replica.turn_when_ended(agent_id, session_id, turn_id))["status"] == "completed"
    assert await replica.services.approval_sweep.once(time.time() + LATER) == 0
    found = await replica.calls.find(approval_id)
    assert found is not None and (found.rec.status, found.rec.lease_until) == (CONTINUED, None)


async def test_a_turn_the_client_resumed_meanwhile_is_not_continued_again(replica: Replica) -> None:
    agent_id, session_id, turn_id, approval_id = await replica.paused_turn()
    await replica.decided_by_a_process_that_died(approval_id)
    [request] = (await replica.ok("GET", f"/v1/agents/{agent_id}/session/{session_id}/turn/{turn_id}"))[
        "approval_requests"
    ]
    replica.model.enqueue(ScriptedReply(text="It is 42."))
    body = {"approvals": [{"call_id": request["call_id"], "approve": True}], "stream": False}
    resumed = await replica.ok("POST", f"/v1/agents/{agent_id}/session/{session_id}/turn/{turn_id}/resume", json=body)
    assert resumed["status"] == "completed"

    assert await replica.services.approval_sweep.once() == 0
    found = await replica.calls.find(approval_id)
    assert found is not None and found.rec.status != PENDING and found.rec.lease_until is None


async def test_a_continuation_put_back_after_its_claim_is_continued_by_a_later_look(
    replica: Replica, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inbox's continuation stored its resume, then failed before launching the run: the turn awaits input
    again, and the decided call keeps its lease, so a later look continues it."""
    agent_id, session_id, turn_id, approval_id = await replica.paused_turn()
    launch = turn_starts.start_turn_span
    failing = [True]

    def once_broken(*args: Any, **kwargs: Any) -> Any:
        if failing:
            failing.clear()
            raise RuntimeError("the run could not be launched")
        return launch(*args, **kwargs)

    monkeypatch.setattr(turn_starts, "start_turn_span", once_broken)
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn/{turn_id}"
    await answered(replica.http, "POST", f"/v1/approvals/{approval_id}/approve", replica.alice, 500)
    assert (await replica.ok("GET", url))["status"] == "awaiting_input"

    replica.model.enqueue(ScriptedReply(text="It is 42."))
    assert await replica.services.approval_sweep.once(time.time() + LATER) == 1
    assert (await replica.turn_when_ended(agent_id, session_id, turn_id))["status"] == "completed"


async def test_a_response_is_continued_once_by_replicas_sweeping_together(
    replica: Replica, mcp_http_server: RunningServer
) -> None:
    replica.model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="add", arguments={"a": 2, "b": 3})]))
    tool = {"type": "mcp", "server_label": "adder", "server_url": mcp_http_server.url, "require_approval": "always"}
    held_response = await replica.ok("POST", "/v1/responses", json={"model": MODEL, "input": "2+3?", "tools": [tool]})
    [held] = (await replica.ok("GET", "/v1/approvals"))["data"]
    await replica.decided_by_a_process_that_died(held["id"])

    replica.model.enqueue(ScriptedReply(text="5."))
    services = replica.services
    sweeps = [ApprovalSweep(services.approvals, replica.calls, services.store) for _ in range(3)]
    assert sum(await asyncio.gather(*(sweep.once() for sweep in sweeps))) == 1

    found = await replica.calls.find(held["id"])
    assert found is not None and found.value.next_response_id is not None
    next_id = found.value.next_response_id
    async with replica.http.stream(
        "GET", f"/v1/responses/{next_id}", params={"stream": "true"}, headers=replica.alice
    ) as events:
        assert events.status_code == 200  # alice owns the continuing response, as she owned the one it continues
        async for _ in events.aiter_lines():
            pass
    continued = await replica.ok("GET", f"/v1/responses/{next_id}")
    assert continued["status"] == "completed" and continued["previous_response_id"] == held_response["id"]
    call = next(item for item in continued["output"] if item["type"] == "mcp_call")
    assert (call["name"], call["output"], call["approval_request_id"]) == ("add", "5", held["id"])
    assert await replica.services.approval_sweep.once(time.time() + LATER) == 0
