"""``/v1/approvals`` over whole runs, on every backend: later pauses of a turn, a decision beside a client tool
call, who sees a held call under a shared policy, a request item changed in its conversation, scopes deleted, and
a held call answered before it is held again.

The helpers come from ``test_approval_inbox.py``; the fixture here adds carol, in alice's team, and a policy
(``shared``) letting a team read each other's sessions, responses or held calls.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from storage_backends import unopened_store
from test_approval_inbox import Inbox, _followed_response, _held_response, _mcp_tool

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.auth.policy import ACTIONS, parse_policy
from ferryman.server.app import build_services
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.storage.domain.approvals import ANSWERED, HeldCall, HeldCalls
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from inprocess import check_script, serving
from mcp_servers import LOCAL_FETCH, RunningServer
from support import WEATHER_TOOL

pytestmark = pytest.mark.anyio

MODEL = "scripted-model"


def _calculator(expression: str) -> ScriptedReply:
    return ScriptedReply(tool_calls=[ScriptedToolCall(name="calculator", arguments={"expression": expression})])


async def test_a_later_pause_of_the_same_turn_is_decided_in_the_inbox_too(inbox: Inbox) -> None:
    agent_id, session_id = await inbox.agent()
    turn = await inbox.paused_turn(agent_id, session_id)
    [first] = (await inbox.listed())["data"]
    inbox.model.enqueue(_calculator("1 + 1"))  # the resumed run holds a second call
    await inbox.ok("POST", f"/v1/approvals/{first['id']}/approve", status=202)
    paused = await inbox.followed(agent_id, session_id, turn["turn_id"])
    assert paused["status"] == "awaiting_input"
    [second] = (await inbox.listed())["data"]
    assert (second["turn_id"], second["arguments"]) == (turn["turn_id"], {"expression": "1 + 1"})

    inbox.model.enqueue(ScriptedReply(text="42 and 2."))
    await inbox.ok("POST", f"/v1/approvals/{second['id']}/approve", status=202)
    done = await inbox.followed(agent_id, session_id, turn["turn_id"])
    assert done["status"] == "completed" and done["output_message"]["content"] == "42 and 2."
    results = [r["content"] for s in done["steps"] if s["step_type"] == "tool_execution" for r in s["tool_responses"]]
    assert results == ["42", "2"]
    assert (await inbox.listed())["data"] == []


async def test_a_decision_beside_a_client_tool_call_does_not_stick_to_the_next_pause(inbox: Inbox) -> None:
    config = {"model": MODEL, "instructions": "b", "toolgroups": ["builtin::math"], "client_tools": [WEATHER_TOOL]}
    agent = await inbox.ok("POST", "/v1/agents", json={"agent_config": {**config, "require_approval": "always"}})
    agent_id = agent["agent_id"]
    session_id = (await inbox.ok("POST", f"/v1/agents/{agent_id}/session", json={"session_name": "s"}))["session_id"]
    calls = [
        ScriptedToolCall(name="calculator", arguments={"expression": "2 + 2"}),
        ScriptedToolCall(name="get_weather", arguments={"city": "Rome"}),
    ]
    inbox.model.enqueue(ScriptedReply(tool_calls=calls))
    body = {"messages": [{"role": "user", "content": "2+2, and Rome?"}], "stream": False}
    turn = await inbox.ok("POST", f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body)
    assert turn["status"] == "awaiting_input"
    [held] = (await inbox.listed())["data"]
    await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", status=202)  # the client still owes its result

    weather = next(c for c in turn["output_message"]["tool_calls"] if c["tool_name"] == "get_weather")
    inbox.model.enqueue(_calculator("3 + 3"))
    url = f"/v1/agents/{agent_id}/session/{session_id}/turn/{turn['turn_id']}/resume"
    answer = {"call_id": weather["call_id"], "tool_name": "get_weather", "content": "warm"}
    resumed = await inbox.ok("POST", url, json={"tool_responses": [answer], "stream": False})
    assert resumed["status"] == "awaiting_input"
    [again] = (await inbox.listed())["data"]
    assert again["arguments"] == {"expression": "3 + 3"}

    inbox.model.enqueue(ScriptedReply(text="4, warm, 6."))
    await inbox.ok("POST", f"/v1/approvals/{again['id']}/approve", status=202)
    done = await inbox.followed(agent_id, session_id, turn["turn_id"])
    assert done["status"] == "completed", done
    results = [r["content"] for s in done["steps"] if s["step_type"] == "tool_execution" for r in s["tool_responses"]]
    assert results == ["4", "warm", "6"]
    # The earlier decision went with the client's resume: it is no longer decided, nor listed.
    old = await inbox.http.post(f"/v1/approvals/{held['id']}/deny", headers=inbox.keys["alice"])
    assert old.status_code == 409


@pytest.fixture
def shared() -> str | None:
    """The kind of record team members may read of each other's (None: the default policy)."""
    return None


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def inbox(request: pytest.FixtureRequest, tmp_path: Path, shared: str | None) -> AsyncIterator[Inbox]:
    """Alice and carol in team red, bob alone; team members may read each other's ``shared`` records."""
    rules = [{"permit": {"actions": ["read"], "resource": f"{shared}::*"}, "when": "user in owners teams"}]
    policy = parse_policy([*rules, {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"}]) if shared else None
    scripted = ScriptedModel()
    async with unopened_store(request.param, tmp_path) as store:
        keys = ApiKeys(store.kernel)
        authenticator = BearerAuthenticator(ApiKeyAuthenticator(keys), None)
        services = build_services(store, [scripted], authenticator=authenticator, fetch=LOCAL_FETCH, policy=policy)
        async with serving(services) as http:
            bearer = {}
            for name, teams in (("alice", ["red"]), ("carol", ["red"]), ("bob", [])):
                key = new_key()
                await keys.create(key_record(name, key, {"teams": teams}))
                bearer[name] = {"Authorization": f"Bearer {key}"}
            yield Inbox(http, services, scripted, bearer)
    check_script(request, scripted.script)


@pytest.mark.parametrize("shared", ["session", "approval", "response"])
async def test_a_held_call_is_listed_to_exactly_those_who_may_read_its_session_or_response(
    inbox: Inbox, shared: str, mcp_http_server: RunningServer
) -> None:
    agent_id, session_id = await inbox.agent()
    await inbox.paused_turn(agent_id, session_id)
    response = await _held_response(inbox, mcp_http_server)
    [held_response, held_turn] = (await inbox.listed())["data"]
    carol = inbox.keys["carol"]
    session = await inbox.http.get(f"/v1/agents/{agent_id}/session/{session_id}", headers=carol)
    reads_session = session.status_code == 200
    reads_response = (await inbox.http.get(f"/v1/responses/{response['id']}", headers=carol)).status_code == 200
    assert (reads_session, reads_response) == (shared == "session", shared == "response")
    expected = [a["id"] for a, reads in ((held_response, reads_response), (held_turn, reads_session)) if reads]
    assert [a["id"] for a in (await inbox.listed("carol"))["data"]] == expected
    assert (await inbox.listed("bob"))["data"] == []
    for held, reads in ((held_turn, reads_session), (held_response, reads_response)):
        cursor = await inbox.http.get("/v1/approvals", params={"after": held["id"]}, headers=carol)
        assert cursor.status_code == (200 if reads else 404), cursor.text
        # Reading is not deciding: carol may not continue alice's run.
        decided = await inbox.http.post(f"/v1/approvals/{held['id']}/approve", headers=carol)
        assert decided.status_code == (403 if reads else 404), decided.text
    assert len((await inbox.listed())["data"]) == 2


async def _held_in_conversation(inbox: Inbox, server: RunningServer) -> tuple[str, dict[str, Any]]:
    conversation = await inbox.ok("POST", "/v1/conversations", json={})
    inbox.model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="add", arguments={"a": 2, "b": 3})]))
    body = {"model": MODEL, "input": "2+3?", "tools": [_mcp_tool(server)], "conversation": conversation["id"]}
    response: dict[str, Any] = await inbox.ok("POST", "/v1/responses", json=body)
    assert response["output"][-1]["type"] == "mcp_approval_request"
    return conversation["id"], response


async def test_an_approval_never_runs_arguments_put_in_the_conversation_after_the_call_was_held(
    inbox: Inbox, mcp_http_server: RunningServer
) -> None:
    conversation_id, response = await _held_in_conversation(inbox, mcp_http_server)
    request = response["output"][-1]
    url = f"/v1/conversations/{conversation_id}/items"
    await inbox.ok("DELETE", f"{url}/{request['id']}")
    forged = {**request, "arguments": json.dumps({"a": 100, "b": 1})}
    await inbox.ok("POST", url, json={"items": [forged]})
    [held] = (await inbox.listed())["data"]
    assert held["arguments"] == {"a": 2, "b": 3}

    refused = await inbox.http.post(f"/v1/approvals/{held['id']}/approve", headers=inbox.keys["alice"])
    assert refused.status_code == 409, refused.text
    assert "changed" in refused.json()["error"]["message"]
    assert (await inbox.listed())["data"] == []


async def test_deleting_a_conversation_takes_its_held_calls_out_of_the_inbox(
    inbox: Inbox, mcp_http_server: RunningServer
) -> None:
    conversation_id, _ = await _held_in_conversation(inbox, mcp_http_server)
    [held] = (await inbox.listed())["data"]
    await inbox.ok("DELETE", f"/v1/conversations/{conversation_id}")
    assert (await inbox.listed())["data"] == []
    gone = await inbox.http.post(f"/v1/approvals/{held['id']}/approve", headers=inbox.keys["alice"])
    assert gone.status_code == 404, gone.text


async def test_a_continuation_the_run_refuses_puts_the_calls_back_in_the_inbox(
    inbox: Inbox, mcp_http_server: RunningServer
) -> None:
    conversation_id, _ = await _held_in_conversation(inbox, mcp_http_server)
    [held] = (await inbox.listed())["data"]
    inbox.model.enqueue(ScriptedReply(text="busy", gate="busy"))
    body = {"model": MODEL, "input": "meanwhile", "conversation": conversation_id, "background": True}
    busy = await inbox.ok("POST", "/v1/responses", json=body)  # the conversation is locked while it runs
    refused = await inbox.http.post(f"/v1/approvals/{held['id']}/approve", headers=inbox.keys["alice"])
    assert refused.status_code == 409, refused.text
    assert [(a["id"], a["status"]) for a in (await inbox.listed())["data"]] == [(held["id"], "pending")]

    inbox.model.script.open_gate("busy")
    assert (await _followed_response(inbox, busy["id"]))["status"] == "completed"
    inbox.model.enqueue(ScriptedReply(text="5."))
    decided = await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", status=202)
    assert (await _followed_response(inbox, decided["next_response_id"]))["status"] == "completed"
    assert (await inbox.listed())["data"] == []


async def test_a_held_call_whose_session_is_gone_leaves_the_inbox_when_decided(inbox: Inbox) -> None:
    agent_id, session_id = await inbox.agent()
    await inbox.paused_turn(agent_id, session_id)
    [held] = (await inbox.listed())["data"]
    await inbox.services.store.delete_session(agent_id, session_id)  # as a crash before the inbox was told
    gone = await inbox.http.post(f"/v1/approvals/{held['id']}/approve", headers=inbox.keys["alice"])
    assert gone.status_code == 404, gone.text
    assert (await inbox.listed())["data"] == []


async def test_a_continued_response_keeps_its_truncation(inbox: Inbox, mcp_http_server: RunningServer) -> None:
    inbox.model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="add", arguments={"a": 2, "b": 3})]))
    body = {"model": MODEL, "input": "2+3?", "tools": [_mcp_tool(mcp_http_server)], "truncation": "auto"}
    await inbox.ok("POST", "/v1/responses", json=body)
    [held] = (await inbox.listed())["data"]
    inbox.model.enqueue(ScriptedReply(text="5."))
    decided = await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", status=202)
    continued = await _followed_response(inbox, decided["next_response_id"])
    assert (continued["status"], continued["truncation"]) == ("completed", "auto")


async def test_a_call_answered_while_it_is_held_again_stays_answered(inbox: Inbox) -> None:
    calls = HeldCalls(inbox.services.store.kernel)
    held = HeldCall(
        id="mcpr_x", source="response", scope="resp_x", response_id="resp_x", call_id="mcpr_x",
        tool_name="add", arguments={"a": 1}, digest="d",
    )  # fmt: skip
    await calls.hold([held], None)
    await calls.close([held.id])  # a client answered it
    await calls.hold([held], None)  # a late hold (the run's settling) never reopens it
    found = await calls.find(held.id)
    assert found is not None and found.rec.status == ANSWERED
