"""Who a run the approval inbox continues goes on as: its owner, not the teammate who decided (on every backend).

Alice owns the paused turn and the held response; carol, in her team, may read and continue alice's turns and
responses, and decides. The resumed turn's usage is alice's, and the continuing response is owned by alice.

Signed-in subjects (the principal set in process): an owner deciding goes on as it is now (a team it left grants
the run nothing), and another caller deciding for a subject goes on with the attributes stored with the turn or
response only for ``schedules.subject_lifetime_seconds`` after they were stored (then: 409), a continuing
response not restarting that time. A teammate's turn in an owner's session goes on as the teammate, never as the
session's owner.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from integration_helpers import assert_error
from storage_backends import unopened_store
from test_approval_inbox import MODEL, Inbox, _followed_response, _held_response

from ferryman.auth.api_keys import ApiKeyAuthenticator, key_record, new_key
from ferryman.auth.bearer import BearerAuthenticator
from ferryman.auth.policy import ACTIONS, parse_policy
from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.schedule_settings import ScheduleSettings
from ferryman.server.app import build_services
from ferryman.services.record_guard import owners_of
from ferryman.storage.domain.api_keys import ApiKeys
from ferryman.testing import ScriptedModel, ScriptedReply, ScriptedToolCall
from inprocess import check_script, serving
from mcp_servers import LOCAL_FETCH, RunningServer

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def inbox(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Inbox]:
    """Alice and carol in team red, who may read and continue each other's agents' turns and responses."""
    team = [
        {"permit": {"actions": ["read", "update"], "resource": f"{kind}::*"}, "when": "user in owners teams"}
        for kind in ("agent", "session", "turn", "response")
    ]
    policy = parse_policy([*team, {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"}])
    scripted = ScriptedModel()
    async with unopened_store(request.param, tmp_path) as store:
        keys = ApiKeys(store.kernel)
        authenticator = BearerAuthenticator(ApiKeyAuthenticator(keys), None)
        services = build_services(store, [scripted], authenticator=authenticator, fetch=LOCAL_FETCH, policy=policy)
        async with serving(services) as http:
            bearer = {}
            for name in ("alice", "carol"):
                key = new_key()
                await keys.create(key_record(name, key, {"teams": ["red"]}))
                bearer[name] = {"Authorization": f"Bearer {key}"}
            yield Inbox(http, services, scripted, bearer)
    check_script(request, scripted.script)


async def test_a_turn_a_teammate_approves_goes_on_as_its_owner(inbox: Inbox) -> None:
    agent_id, session_id = await inbox.agent()
    turn = await inbox.paused_turn(agent_id, session_id)
    [held] = (await inbox.listed("carol"))["data"]
    paused = (await inbox.services.usage.summary(None, "principal", since=0)).data
    inbox.model.enqueue(ScriptedReply(text="It is 42."))
    await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", "carol", status=202)
    done = await inbox.followed(agent_id, session_id, turn["turn_id"])
    assert done["status"] == "completed" and done["output_message"]["content"] == "It is 42."

    usage = (await inbox.services.usage.summary(None, "principal", since=0)).data
    assert [row.key for row in usage] == [row.key for row in paused] == ["key:alice"], "both runs are alice's"
    assert usage[0].total_tokens > paused[0].total_tokens, "the resumed run's usage is counted"


async def test_a_response_a_teammate_approves_is_continued_by_a_response_of_its_owner(
    inbox: Inbox, mcp_http_server: RunningServer
) -> None:
    await _held_response(inbox, mcp_http_server)
    [held] = (await inbox.listed("carol"))["data"]
    inbox.model.enqueue(ScriptedReply(text="5."))
    decided = await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", "carol", status=202)
    next_id = decided["next_response_id"]
    assert (await _followed_response(inbox, next_id))["status"] == "completed"

    owners = await owners_of(inbox.services.store, "response", [next_id])
    assert owners[next_id].id == "alice"
    usage = await inbox.services.usage.summary(None, "principal", since=0)
    assert [row.key for row in usage.data] == ["key:alice"], "both runs are alice's"


# -- signed-in subjects ------------------------------------------------------------------------------------------

ALICE = Principal(PrincipalKind.SUBJECT, "alice")
RED_ALICE = Principal(PrincipalKind.SUBJECT, "alice", {"teams": ("red",)})
RED_BOB = Principal(PrincipalKind.SUBJECT, "bob", {"teams": ("red",)})
LIFETIME = ScheduleSettings().subject_lifetime_seconds
OWNERS = {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"}


class Clock:
    """The time the services judge stored attributes by, set by the test (records are made at the real time)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def _subjects(
    request: pytest.FixtureRequest, tmp_path: Path, team: list[dict[str, Any]], backend: str | None = None
) -> AsyncIterator[tuple[Inbox, Clock]]:
    """An inbox whose callers are the subjects the test acts as (``keys`` send no credential), on ``backend``
    (default: the fixture's parameter)."""
    scripted, clock = ScriptedModel(), Clock()
    async with unopened_store(backend or request.param, tmp_path) as store:
        policy = parse_policy([*team, OWNERS])
        services = build_services(store, [scripted], fetch=LOCAL_FETCH, policy=policy, clock=clock)
        async with serving(services) as http:
            yield Inbox(http, services, scripted, {"alice": {}, "bob": {}}), clock
    check_script(request, scripted.script)


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def readers(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Inbox, Clock]]:
    """Team red may read what its members own (a member's agent's memory blocks too), and change nothing."""
    team = [{"permit": {"actions": ["read"]}, "when": "user in owners teams"}]
    async for made in _subjects(request, tmp_path, team):
        yield made


@pytest.fixture(params=["sqlite", "postgres", "redis"])
async def runs_shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Inbox, Clock]]:
    """Team red may read and continue its members' turns and responses."""
    team = [
        {"permit": {"actions": ["read", "update"], "resource": f"{kind}::*"}, "when": "user in owners teams"}
        for kind in ("agent", "session", "turn", "response")
    ]
    async for made in _subjects(request, tmp_path, team):
        yield made


async def test_an_owner_who_left_a_team_decides_and_its_run_goes_on_without_what_the_team_granted(
    readers: tuple[Inbox, Clock],
) -> None:
    inbox, _ = readers
    with acting_as(RED_BOB):
        config = {"model": MODEL, "instructions": "Be brief.", "toolgroups": ["builtin::math"]}
        agent = await inbox.ok("POST", "/v1/agents", json={"agent_config": {**config, "require_approval": "always"}})
        agent_id = agent["agent_id"]
        await inbox.ok("PUT", f"/v1/agents/{agent_id}/memory/plans", json={"value": "The red team's plans."})
    with acting_as(RED_ALICE):  # on bob's team: his agent's memory is in her turn's prompt
        session = await inbox.ok("POST", f"/v1/agents/{agent_id}/session", json={"session_name": "s"})
        turn = await inbox.paused_turn(agent_id, session["session_id"])
    with acting_as(ALICE):  # off the team now: she decides, and her run goes on as she is
        [held] = (await inbox.listed())["data"]
        inbox.model.enqueue(ScriptedReply(text="It is 42."))
        await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", status=202)
        done = await inbox.followed(agent_id, session["session_id"], turn["turn_id"])
    assert done["status"] == "completed"
    paused, resumed = (json.dumps(request["messages"][0]) for request in inbox.model.requests)
    assert "red team's plans" in paused
    assert "red team's plans" not in resumed, "the team she left still grants her run its memory"


async def test_another_caller_decides_for_a_subject_only_while_its_stored_attributes_are_fresh(
    runs_shared: tuple[Inbox, Clock],
) -> None:
    inbox, clock = runs_shared
    with acting_as(RED_ALICE):
        agent_id, session_id = await inbox.agent()
        first = await inbox.paused_turn(agent_id, session_id)
    clock.now = time.time() + LIFETIME - 600  # her session was made less than 10 minutes ago
    with acting_as(RED_BOB):  # fresh: the run goes on as alice, with the attributes stored with her session
        [held] = (await inbox.listed("bob"))["data"]
        inbox.model.enqueue(ScriptedReply(text="It is 42."))
        await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", "bob", status=202)
        assert (await inbox.followed(agent_id, session_id, first["turn_id"]))["status"] == "completed"
    usage = (await inbox.services.usage.summary(None, "principal", since=0)).data
    assert [row.key for row in usage] == ["sub:alice"]

    with acting_as(RED_ALICE):
        second = await inbox.paused_turn(agent_id, session_id, "7 * 6")
    clock.now = time.time() + LIFETIME
    with acting_as(RED_BOB):  # stale: bob may not act as her any more; nothing is decided
        [held] = (await inbox.listed("bob"))["data"]
        error = assert_error(await inbox.http.post(f"/v1/approvals/{held['id']}/approve"), 409)
        assert "schedules.subject_lifetime_seconds" in error["message"]
        assert [call["status"] for call in (await inbox.listed("bob"))["data"]] == ["pending"]
    with acting_as(RED_ALICE):  # she may: her run goes on as she is now
        inbox.model.enqueue(ScriptedReply(text="It is 42."))
        await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", status=202)
        assert (await inbox.followed(agent_id, session_id, second["turn_id"]))["status"] == "completed"


async def test_another_caller_may_not_continue_a_subjects_response_once_its_stored_attributes_are_stale(
    runs_shared: tuple[Inbox, Clock], mcp_http_server: RunningServer
) -> None:
    inbox, clock = runs_shared
    with acting_as(RED_ALICE):
        await _held_response(inbox, mcp_http_server)
    clock.now = time.time() + LIFETIME
    with acting_as(RED_BOB):
        [held] = (await inbox.listed("bob"))["data"]
        error = assert_error(await inbox.http.post(f"/v1/approvals/{held['id']}/approve"), 409)
        assert "schedules.subject_lifetime_seconds" in error["message"]
    with acting_as(RED_ALICE):
        inbox.model.enqueue(ScriptedReply(text="5."))
        decided = await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", status=202)
        assert (await _followed_response(inbox, decided["next_response_id"]))["status"] == "completed"


async def test_a_teammates_own_turn_in_an_owners_session_does_not_go_on_with_the_owners_privileges(
    runs_shared: tuple[Inbox, Clock],
) -> None:
    """Bob may start turns in alice's session (update on session) but not read her agent's memory blocks: his
    turn, paused on a held call he approves himself, goes on as bob, not as the session's owner."""
    inbox, _ = runs_shared
    with acting_as(RED_ALICE):
        agent_id, session_id = await inbox.agent()
        await inbox.ok("PUT", f"/v1/agents/{agent_id}/memory/plans", json={"value": "Alice's private plans."})
    with acting_as(RED_BOB):
        turn = await inbox.paused_turn(agent_id, session_id)
        [held] = (await inbox.listed("bob"))["data"]
        inbox.model.enqueue(ScriptedReply(text="It is 42."))
        await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", "bob", status=202)
        done = await inbox.followed(agent_id, session_id, turn["turn_id"])
    assert done["status"] == "completed"
    paused, resumed = (json.dumps(request["messages"][0]) for request in inbox.model.requests)
    assert "private plans" not in paused, "bob's own run reads none of alice's memory"
    assert "private plans" not in resumed, "bob approving his own turn ran it as alice, with her memory"
    usage = (await inbox.services.usage.summary(None, "principal", since=0)).data
    assert [row.key for row in usage] == ["sub:bob"], "both runs are bob's"


async def test_a_teammates_turn_the_sessions_owner_approves_goes_on_as_the_teammate(
    runs_shared: tuple[Inbox, Clock],
) -> None:
    inbox, _ = runs_shared
    with acting_as(RED_ALICE):
        agent_id, session_id = await inbox.agent()
        await inbox.ok("PUT", f"/v1/agents/{agent_id}/memory/plans", json={"value": "Alice's private plans."})
    with acting_as(RED_BOB):
        turn = await inbox.paused_turn(agent_id, session_id)
    with acting_as(RED_ALICE):  # she decides; the run stays bob's, with none of her privileges
        [held] = (await inbox.listed())["data"]
        inbox.model.enqueue(ScriptedReply(text="It is 42."))
        await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", status=202)
        assert (await inbox.followed(agent_id, session_id, turn["turn_id"]))["status"] == "completed"
    resumed = json.dumps(inbox.model.requests[-1]["messages"][0])
    assert "private plans" not in resumed, "the decider's privileges reached bob's run"
    usage = (await inbox.services.usage.summary(None, "principal", since=0)).data
    assert [row.key for row in usage] == ["sub:bob"]


async def test_a_continuing_response_does_not_restart_the_time_a_subjects_stored_attributes_are_acted_with(
    runs_shared: tuple[Inbox, Clock], mcp_http_server: RunningServer
) -> None:
    """Alice's response is made 600 seconds before her stored attributes run out (its ``created_at`` is set
    back in the store: records take the real time); bob continues it in time, and the continuing response,
    made now with her stored attributes, pauses again: once those 600 seconds are past, bob may not continue
    it, though the continuing response itself is new."""
    inbox, clock = runs_shared
    with acting_as(RED_ALICE):
        first = await _held_response(inbox, mcp_http_server)
    store = inbox.services.store
    record = await store.get_response(first["id"])
    made = int(time.time()) - LIFETIME + 600
    made_earlier = dataclasses.replace(record, response=record.response.model_copy(update={"created_at": made}))
    await store.finish_response(made_earlier, [], [])  # its stored body rewritten, nothing else
    clock.now = time.time()
    with acting_as(RED_BOB):
        [held] = (await inbox.listed("bob"))["data"]
        inbox.model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="add", arguments={"a": 5, "b": 1})]))
        decided = await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", "bob", status=202)
        second = await _followed_response(inbox, decided["next_response_id"])
        assert [item["type"] for item in second["output"]][-1] == "mcp_approval_request"
        [again] = [call for call in (await inbox.listed("bob"))["data"] if call["status"] == "pending"]
        clock.now = made + LIFETIME
        error = assert_error(await inbox.http.post(f"/v1/approvals/{again['id']}/approve"), 409)
        assert "schedules.subject_lifetime_seconds" in error["message"]
    with acting_as(RED_ALICE):
        inbox.model.enqueue(ScriptedReply(text="6."))
        decided = await inbox.ok("POST", f"/v1/approvals/{again['id']}/approve", status=202)
        assert (await _followed_response(inbox, decided["next_response_id"]))["status"] == "completed"


@pytest.fixture
async def shared(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Inbox, Clock]]:
    """Team red may read and continue its members' records of the kinds the test names, and no others (on
    SQLite)."""
    team = [
        {"permit": {"actions": ["read", "update"], "resource": f"{kind}::*"}, "when": "user in owners teams"}
        for kind in request.param
    ]
    async for made in _subjects(request, tmp_path, team, "sqlite"):
        yield made


@pytest.mark.parametrize("shared", [("agent", "session")], ids=["sessions"], indirect=True)
async def test_a_decider_who_may_not_read_the_paused_turn_is_refused_and_the_call_stays(
    shared: tuple[Inbox, Clock],
) -> None:
    """A held call is listed to whoever may read its session; one who may not read the turn is refused its
    decision as if the call were gone, but the call is not taken from its owner's inbox."""
    inbox, _ = shared
    with acting_as(RED_ALICE):
        agent_id, session_id = await inbox.agent()
        turn = await inbox.paused_turn(agent_id, session_id)
    with acting_as(RED_BOB):
        [held] = (await inbox.listed("bob"))["data"]
        await inbox.ok("POST", f"/v1/approvals/{held['id']}/deny", "bob", status=404, json={"reason": "no"})
    with acting_as(RED_ALICE):
        assert [call["id"] for call in (await inbox.listed())["data"]] == [held["id"]]
        inbox.model.enqueue(ScriptedReply(text="It is 42."))
        await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", status=202)
        assert (await inbox.followed(agent_id, session_id, turn["turn_id"]))["status"] == "completed"


@pytest.mark.parametrize("shared", [("session", "response")], ids=["responses"], indirect=True)
async def test_a_decider_who_may_not_read_the_responses_conversation_may_not_continue_it(
    shared: tuple[Inbox, Clock], mcp_http_server: RunningServer
) -> None:
    """The continuation reads and writes the conversation's items: a decider who may continue the response but
    not read its conversation is answered as if the call were gone (and the call stays)."""
    inbox, _ = shared
    with acting_as(RED_ALICE):
        conversation = await inbox.ok("POST", "/v1/conversations", json={})
        inbox.model.enqueue(ScriptedReply(tool_calls=[ScriptedToolCall(name="add", arguments={"a": 2, "b": 3})]))
        tool = {"type": "mcp", "server_label": "adder", "server_url": mcp_http_server.url, "require_approval": "always"}
        body = {"model": MODEL, "input": "2+3?", "tools": [tool], "conversation": conversation["id"]}
        await inbox.ok("POST", "/v1/responses", json=body)
    with acting_as(RED_BOB):
        assert (await inbox.http.get(f"/v1/conversations/{conversation['id']}")).status_code == 404
        [held] = (await inbox.listed("bob"))["data"]
        await inbox.ok("POST", f"/v1/approvals/{held['id']}/approve", "bob", status=404, json={})
    with acting_as(RED_ALICE):
        assert [call["id"] for call in (await inbox.listed())["data"]] == [held["id"]]
