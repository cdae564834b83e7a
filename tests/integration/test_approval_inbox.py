"""``/v1/approvals`` on every backend: the calls waiting for a person, across turns and responses, decided there.

Two API keys: alice's agent holds every calculator call for approval, and her
responses hold every call of the test MCP server's tools; bob sees none of it.
A decision continues the same turn (or the response) on the server: the test
then follows the turn's event stream (or the continuing response's) to its end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from storage_backends import unopened_store

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.server.app import Services, build_services
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from inprocess import check_script, serving
from mcp_servers import LOCAL_FETCH, RunningServer

pytestmark = pytest.mark.anyio

MODEL = "scripted-model"


@dataclass
class Inbox:
    http: httpx.AsyncClient
    services: Services
    model: ScriptedModel
    keys: dict[str, dict[str, str]]

    async def ok(self, method: str, url: str, who: str = "alice", status: int = 200, **kwargs: Any) -> Any:
        answer = await self.http.request(method, url, headers=self.keys[who], **kwargs)
        assert answer.status_code == status, answer.text
        return answer.json()

    async def listed(self, who: str = "alice", **params: Any) -> dict[str, Any]:
        listing: dict[str, Any] = await self.ok("GET", "/v1/approvals", who, params=params)
        assert listing["object"] == "list"
        return listing

    async def agent(self) -> tuple[str, str]:
        config = {"model": MODEL, "instructions": "Be brief.", "toolgroups": ["builtin::math"]}
        agent_id = (
            await self.ok("POST", "/v1/agents", json={"agent_config": {**config, "require_approval": "always"}})
        )["agent_id"]
        session = await self.ok("POST", f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
        return agent_id, session["session_id"]

    async def paused_turn(self, agent_id: str, session_id: str, expression: str = "6 * 7") -> dict[str, Any]:
        self.model.enqueue(
            ScriptedReply(tool_calls=[ScriptedToolCall(name="calculator", arguments={"expression": expression})])
        )
        body = {"messages": [{"role": "user", "content": f"{expression}?"}], "stream": False}
        turn: dict[str, Any] = await self.ok("POST", f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body)
        assert turn["status"] == "awaiting_input"
        return turn

    async def followed(self, agent_id: str, session_id: str, turn_id: str) -> dict[str, Any]:
        """The turn once its event stream (followed to its end, not polled) ends."""
        url = f"/v1/agents/{agent_id}/session/{session_id}/turn/{turn_id}"
        async with self.http.stream("GET", f"{url}/events", headers=self.keys["alice"]) as events:
            assert events.status_code == 200
            async for _ in events.aiter_lines():
                pass
        turn: dict[str, Any] = await self.ok("GET", url)
        return turn


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def inbox(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Inbox]:
    scripted = ScriptedModel()
    async with unopened_store(request.param, tmp_path) as store:
        keys = ApiKeys(store.kernel)
        services = build_services(
            store, [scripted], authenticator=BearerAuthenticator(ApiKeyAuthenticator(keys), None), fetch=LOCAL_FETCH
        )
        async with serving(services) as http:
            bearer = {}
            for name in ("alice", "bob"):
                key = new_key()
                await keys.create(key_record(name, key, {}))
                bearer[name] = {"Authorization": f"Bearer {key}"}
            yield Inbox(http, services, scripted, bearer)
    check_script(request, scripted.script)


def _mcp_tool(server: RunningServer) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "adder", "server_url": server.url, "require_approval": "always"}


async def _held_response(inbox: Inbox, server: RunningServer) -> dict[str, Any]:
    inbox.model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="add", arguments={"a": 2, "b": 3})]))
    body = {"model": MODEL, "input": "2+3?", "tools": [_mcp_tool(server)]}
    response: dict[str, Any] = await inbox.ok("POST", "/v1/responses", json=body)
    assert response["status"] == "completed"
    assert [item["type"] for item in response["output"]][-1] == "mcp_approval_request"
    return response


async def test_the_inbox_shows_a_callers_turn_and_response_calls_and_no_one_elses(
    inbox: Inbox, mcp_http_server: RunningServer
) -> None:
    agent_id, session_id = await inbox.agent()
    turn = await inbox.paused_turn(agent_id, session_id)
    [turn_request] = turn["approval_requests"]
    response = await _held_response(inbox, mcp_http_server)
    request_item = response["output"][-1]

    listing = await inbox.listed()
    assert listing["has_more"] is False
    held_response, held_turn = listing["data"]  # newest first
    assert held_turn == {
        **held_turn,
        "object": "approval",
        "status": "pending",
        "tool_name": "calculator",
        "arguments": {"expression": "6 * 7"},
        "server_label": None,
        "agent_id": agent_id,
        "session_id": session_id,
        "turn_id": turn["turn_id"],
        "response_id": None,
        "call_id": turn_request["call_id"],
        "digest": turn_request["digest"],
    }
    assert held_response == {
        **held_response,
        "id": request_item["id"],
        "status": "pending",
        "tool_name": "add",
        "arguments": {"a": 2, "b": 3},
        "server_label": "adder",
        "agent_id": None,
        "turn_id": None,
        "response_id": response["id"],
    }
    assert isinstance(held_turn["created_at"], int) and held_turn["created_at"] <= held_response["created_at"]
    assert (listing["first_id"], listing["last_id"]) == (held_response["id"], held_turn["id"])
    assert [a["id"] for a in (await inbox.listed(source="turn"))["data"]] == [held_turn["id"]]
    assert [a["id"] for a in (await inbox.listed(source="response"))["data"]] == [held_response["id"]]
    assert [a["id"] for a in (await inbox.listed(agent_id=agent_id))["data"]] == [held_turn["id"]]
    assert (await inbox.listed(agent_id=agent_id, source="response"))["data"] == []

    assert (await inbox.listed("bob"))["data"] == []
    for held in (held_turn, held_response):
        refused = await inbox.http.post(f"/v1/approvals/{held['id']}/approve", headers=inbox.keys["bob"])
        assert refused.status_code == 404, refused.text
    unknown = await inbox.http.post("/v1/approvals/apr_nope/deny", headers=inbox.keys["alice"])
    assert unknown.status_code == 404
    bad = await inbox.http.get("/v1/approvals", params={"source": "agent"}, headers=inbox.keys["alice"])
    assert bad.status_code == 400
    # Still pending for alice: bob's attempts changed nothing.
    assert len((await inbox.listed())["data"]) == 2
    inbox.model.enqueue(ScriptedReply(text="Not adding."))
    denied = await inbox.ok("POST", f"/v1/approvals/{held_response['id']}/deny", status=202)
    inbox.model.enqueue(ScriptedReply(text="Not calculating."))
    await inbox.ok("POST", f"/v1/approvals/{held_turn['id']}/deny", status=202)
    await inbox.followed(agent_id, session_id, turn["turn_id"])
    assert (await _followed_response(inbox, denied["next_response_id"]))["status"] == "completed"


async def _followed_response(inbox: Inbox, response_id: str) -> dict[str, Any]:
    """The response once its event stream (followed to its end, not polled) ends."""
    params = {"stream": "true"}
    async with inbox.http.stream(
        "GET", f"/v1/responses/{response_id}", params=params, headers=inbox.keys["alice"]
    ) as events:
        assert events.status_code == 200
        async for _ in events.aiter_lines():
            pass
    response: dict[str, Any] = await inbox.ok("GET", f"/v1/responses/{response_id}")
    return response


async def test_an_approval_continues_the_same_turn_on_the_server_and_the_call_runs(inbox: Inbox) -> None:
    agent_id, session_id = await inbox.agent()
    turn = await inbox.paused_turn(agent_id, session_id)
    [held] = (await inbox.listed())["data"]
    inbox.model.enqueue(ScriptedReply(text="It is 42."))
    decided = await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", status=202)
    assert decided == {**held, "status": "approved", "decided_at": decided["decided_at"]}

    done = await inbox.followed(agent_id, session_id, turn["turn_id"])
    assert done["turn_id"] == turn["turn_id"] and done["status"] == "completed"
    [tool_step] = [s for s in done["steps"] if s["step_type"] == "tool_execution"]
    assert [r["content"] for r in tool_step["tool_responses"]] == ["42"]
    assert done["output_message"]["content"] == "It is 42."
    assert (await inbox.listed())["data"] == []

    again = await inbox.http.post(f"/v1/approvals/{held['id']}/deny", headers=inbox.keys["alice"])
    assert again.status_code == 409, again.text


async def test_a_denial_completes_the_turn_without_running_the_call(inbox: Inbox) -> None:
    agent_id, session_id = await inbox.agent()
    turn = await inbox.paused_turn(agent_id, session_id)
    [held] = (await inbox.listed())["data"]
    inbox.model.enqueue(ScriptedReply(text="I will not calculate."))
    body = {"reason": "no maths today"}
    decided = await inbox.ok("POST", f"/v1/approvals/{held['id']}/deny", json=body, status=202)
    assert (decided["status"], decided["reason"]) == ("denied", "no maths today")

    done = await inbox.followed(agent_id, session_id, turn["turn_id"])
    assert done["status"] == "completed"
    [tool_step] = [s for s in done["steps"] if s["step_type"] == "tool_execution"]
    [denied] = tool_step["tool_responses"]
    assert denied["content"] == "the user denied this call: no maths today"
    assert denied["metadata"] == {"denied": True}
    tool_messages = [m["content"] for m in inbox.model.requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_messages == ["the user denied this call: no maths today"]
    again = await inbox.http.post(f"/v1/approvals/{held['id']}/approve", headers=inbox.keys["alice"])
    assert again.status_code == 409


async def test_an_approval_continues_a_response_with_the_held_call(
    inbox: Inbox, mcp_http_server: RunningServer
) -> None:
    held_response = await _held_response(inbox, mcp_http_server)
    [held] = (await inbox.listed())["data"]
    inbox.model.enqueue(ScriptedReply(text="5."))
    decided = await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", status=202)
    assert decided["status"] == "approved"
    next_id = decided["next_response_id"]
    assert next_id and next_id != held_response["id"]

    continued = await _followed_response(inbox, next_id)
    assert continued["status"] == "completed", continued
    assert continued["previous_response_id"] == held_response["id"]
    call = next(item for item in continued["output"] if item["type"] == "mcp_call")
    assert (call["name"], call["output"], call["approval_request_id"]) == ("add", "5", held["id"])
    assert (await inbox.listed())["data"] == []


async def test_a_client_resuming_the_turn_itself_takes_its_calls_out_of_the_inbox(inbox: Inbox) -> None:
    agent_id, session_id = await inbox.agent()
    turn = await inbox.paused_turn(agent_id, session_id)
    [request] = turn["approval_requests"]
    inbox.model.enqueue(ScriptedReply(text="42."))
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn/{turn['turn_id']}/resume"
    body = {"approvals": [{"call_id": request["call_id"], "approve": True}], "stream": False}
    assert (await inbox.ok("POST", url, json=body))["status"] == "completed"
    assert (await inbox.listed())["data"] == []


async def test_the_inbox_pages_with_a_cursor(inbox: Inbox) -> None:
    agent_id, _ = await inbox.agent()
    ids = []
    for n in range(3):
        session = await inbox.ok("POST", f"/v1/agents/{agent_id}/session", json={"session_name": f"s{n}"})
        turn = await inbox.paused_turn(agent_id, session["session_id"], f"{n} + 1")
        ids.append(turn["turn_id"])
    first = await inbox.listed(limit=2, order="asc")
    assert [a["turn_id"] for a in first["data"]] == ids[:2] and first["has_more"] is True
    second = await inbox.listed(limit=2, order="asc", after=first["last_id"])
    assert [a["turn_id"] for a in second["data"]] == ids[2:] and second["has_more"] is False
    newest = await inbox.listed(limit=1)
    assert [a["turn_id"] for a in newest["data"]] == ids[2:] and newest["has_more"] is True
    too_many = await inbox.http.get("/v1/approvals", params={"limit": 101}, headers=inbox.keys["alice"])
    assert too_many.status_code == 400 and "limit" in too_many.text
    hidden = await inbox.http.get("/v1/approvals", params={"after": first["last_id"]}, headers=inbox.keys["bob"])
    assert hidden.status_code == 404
