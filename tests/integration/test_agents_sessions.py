"""Agents and sessions over HTTP: create, get, list with paging, delete, cascades."""

from __future__ import annotations

import httpx
import pytest
from integration_helpers import assert_error, run_turn, session_url, turn_url

from inprocess import Served
from support import create_agent, create_session

PREFIXES = ["/v1", "/v1alpha"]


@pytest.mark.parametrize("prefix", PREFIXES)
def test_agent_create_get_delete_under_both_prefixes(http: httpx.Client, prefix: str) -> None:
    config = {"model": "scripted-model", "instructions": "Be brief.", "name": f"agent{prefix}"}
    created = http.post(f"{prefix}/agents", json={"agent_config": config})
    assert created.status_code == 200, created.text
    agent_id = created.json()["agent_id"]

    got = http.get(f"{prefix}/agents/{agent_id}")
    assert got.status_code == 200, got.text
    agent = got.json()
    assert agent["agent_id"] == agent_id
    assert agent["agent_config"]["model"] == "scripted-model"
    assert agent["agent_config"]["instructions"] == "Be brief."
    assert agent["agent_config"]["name"] == f"agent{prefix}"
    assert agent["created_at"]

    deleted = http.delete(f"{prefix}/agents/{agent_id}")
    assert deleted.status_code == 200, deleted.text
    error = assert_error(http.get(f"{prefix}/agents/{agent_id}"), 404, "not_found")
    assert agent_id in error["message"]
    assert_error(http.delete(f"{prefix}/agents/{agent_id}"), 404, "not_found")


def test_agent_created_under_v1_is_visible_under_v1alpha(http: httpx.Client) -> None:
    agent_id = create_agent(http)
    assert http.get(f"/v1alpha/agents/{agent_id}").json()["agent_id"] == agent_id
    session_id = http.post(f"/v1alpha/agents/{agent_id}/session", json={"session_name": "alpha"}).json()["session_id"]
    assert http.get(session_url(agent_id, session_id)).json()["session_name"] == "alpha"


def test_list_agents_pages_in_creation_order(http: httpx.Client) -> None:
    mine = [create_agent(http, name=f"pager-{i}") for i in range(3)]
    everything = http.get("/v1/agents")
    assert everything.status_code == 200, everything.text
    body = everything.json()
    assert body["has_more"] is False
    assert body["url"] is None
    ids = [agent["agent_id"] for agent in body["data"]]
    # This worker's server runs one test at a time: the agents just created are the newest.
    assert ids[-3:] == mine
    total = len(ids)

    first = http.get("/v1/agents", params={"start_index": total - 3, "limit": 2}).json()
    assert [a["agent_id"] for a in first["data"]] == mine[:2]
    assert first["has_more"] is True
    assert first["url"] is None

    rest = http.get("/v1/agents", params={"start_index": total - 1, "limit": 2}).json()
    assert [a["agent_id"] for a in rest["data"]] == mine[2:]
    assert rest["has_more"] is False

    exact = http.get("/v1/agents", params={"start_index": total - 2, "limit": 2}).json()
    assert [a["agent_id"] for a in exact["data"]] == mine[1:]
    assert exact["has_more"] is False

    beyond = http.get("/v1/agents", params={"start_index": total + 5, "limit": 2}).json()
    assert beyond == {"data": [], "has_more": False, "url": None}

    alpha = http.get("/v1alpha/agents", params={"start_index": total - 3}).json()
    assert [a["agent_id"] for a in alpha["data"]] == mine


def test_list_agents_rejects_bad_paging_parameters(http: httpx.Client) -> None:
    assert assert_error(http.get("/v1/agents", params={"limit": 0}), 400)["field"] == "limit"
    assert assert_error(http.get("/v1/agents", params={"start_index": -1}), 400)["field"] == "start_index"
    assert assert_error(http.get("/v1/agents", params={"limit": "ten"}), 400)["field"] == "limit"


@pytest.mark.parametrize("prefix", PREFIXES)
def test_session_create_get_delete(http: httpx.Client, prefix: str) -> None:
    agent_id = create_agent(http)
    created = http.post(f"{prefix}/agents/{agent_id}/session", json={"session_name": "chat"})
    assert created.status_code == 200, created.text
    session_id = created.json()["session_id"]

    got = http.get(session_url(agent_id, session_id, prefix))
    assert got.status_code == 200, got.text
    session = got.json()
    assert session["session_id"] == session_id
    assert session["session_name"] == "chat"
    assert session["turns"] == []
    assert session["started_at"]

    assert http.delete(session_url(agent_id, session_id, prefix)).status_code == 200
    assert_error(http.get(session_url(agent_id, session_id, prefix)), 404, "not_found")
    assert_error(http.delete(session_url(agent_id, session_id, prefix)), 404, "not_found")
    # the agent itself survives
    assert http.get(f"{prefix}/agents/{agent_id}").status_code == 200


def test_list_sessions_pages_in_creation_order(http: httpx.Client) -> None:
    agent_id = create_agent(http)
    other = create_agent(http)
    create_session(http, other, "someone else's")
    sessions = [create_session(http, agent_id, f"s{i}") for i in range(3)]

    everything = http.get(f"/v1/agents/{agent_id}/sessions").json()
    assert [s["session_id"] for s in everything["data"]] == sessions
    assert [s["session_name"] for s in everything["data"]] == ["s0", "s1", "s2"]
    assert everything["has_more"] is False
    assert everything["url"] is None

    first = http.get(f"/v1/agents/{agent_id}/sessions", params={"limit": 2}).json()
    assert [s["session_id"] for s in first["data"]] == sessions[:2]
    assert first["has_more"] is True

    second = http.get(f"/v1/agents/{agent_id}/sessions", params={"start_index": 2, "limit": 2}).json()
    assert [s["session_id"] for s in second["data"]] == sessions[2:]
    assert second["has_more"] is False

    middle = http.get(f"/v1alpha/agents/{agent_id}/sessions", params={"start_index": 1, "limit": 1}).json()
    assert [s["session_id"] for s in middle["data"]] == sessions[1:2]
    assert middle["has_more"] is True


def test_list_sessions_includes_their_turns(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    model.enqueue_text("one")
    turn = run_turn(http, agent_id, session_id, "first")
    listed = http.get(f"/v1/agents/{agent_id}/sessions").json()["data"]
    assert [t["turn_id"] for t in listed[0]["turns"]] == [turn["turn_id"]]
    assert listed[0]["turns"][0]["output_message"]["content"] == "one"


def test_list_sessions_of_unknown_agent_is_404(http: httpx.Client) -> None:
    assert_error(http.get("/v1/agents/no-such-agent/sessions"), 404, "not_found")


def _three_turns(http: httpx.Client, model: Served, agent_id: str, session_id: str) -> list[str]:
    ids = []
    for i in range(3):
        model.enqueue_text(f"answer {i}")
        ids.append(run_turn(http, agent_id, session_id, f"question {i}")["turn_id"])
    return ids


def test_get_session_filters_turns_with_comma_separated_ids(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    ids = _three_turns(http, model, agent_id, session_id)

    full = http.get(session_url(agent_id, session_id)).json()
    assert [t["turn_id"] for t in full["turns"]] == ids

    filtered = http.get(f"{session_url(agent_id, session_id)}?turn_ids={ids[0]},{ids[2]}")
    assert filtered.status_code == 200, filtered.text
    assert [t["turn_id"] for t in filtered.json()["turns"]] == [ids[0], ids[2]]


def test_get_session_filters_turns_with_repeated_ids(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    ids = _three_turns(http, model, agent_id, session_id)

    filtered = http.get(session_url(agent_id, session_id), params=[("turn_ids", ids[2]), ("turn_ids", ids[1])])
    assert filtered.status_code == 200, filtered.text
    # turns keep their start order whatever the order of the filter
    assert [t["turn_id"] for t in filtered.json()["turns"]] == [ids[1], ids[2]]

    unknown = http.get(session_url(agent_id, session_id), params={"turn_ids": "not-a-turn"})
    assert unknown.status_code == 200, unknown.text
    assert unknown.json()["turns"] == []


def test_session_of_another_agent_is_404(http: httpx.Client) -> None:
    owner = create_agent(http)
    stranger = create_agent(http)
    session_id = create_session(http, owner)
    assert_error(http.get(session_url(stranger, session_id)), 404, "not_found")
    assert_error(http.delete(session_url(stranger, session_id)), 404, "not_found")
    assert http.get(session_url(owner, session_id)).status_code == 200


def test_deleting_an_agent_removes_its_sessions_and_turns(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    model.enqueue_text("stored")
    turn_id = run_turn(http, agent_id, session_id, "hi")["turn_id"]

    assert http.delete(f"/v1/agents/{agent_id}").status_code == 200
    assert_error(http.get(f"/v1/agents/{agent_id}"), 404, "not_found")
    assert_error(http.get(session_url(agent_id, session_id)), 404, "not_found")
    assert_error(http.get(turn_url(agent_id, session_id, turn_id)), 404, "not_found")
    assert_error(http.get(f"/v1/agents/{agent_id}/sessions"), 404, "not_found")
    assert agent_id not in [a["agent_id"] for a in http.get("/v1/agents").json()["data"]]


def test_deleting_a_session_removes_its_turns(http: httpx.Client, model: Served) -> None:
    agent_id = create_agent(http)
    session_id = create_session(http, agent_id)
    kept_session = create_session(http, agent_id)
    model.enqueue_text("gone")
    turn = run_turn(http, agent_id, session_id, "hi")
    model.enqueue_text("kept")
    kept = run_turn(http, agent_id, kept_session, "hello")

    assert http.delete(session_url(agent_id, session_id)).status_code == 200
    assert_error(http.get(turn_url(agent_id, session_id, turn["turn_id"])), 404, "not_found")
    step_id = turn["steps"][0]["step_id"]
    assert_error(http.get(f"{turn_url(agent_id, session_id, turn['turn_id'])}/step/{step_id}"), 404, "not_found")
    listed = http.get(f"/v1/agents/{agent_id}/sessions").json()["data"]
    assert [s["session_id"] for s in listed] == [kept_session]
    assert http.get(turn_url(agent_id, kept_session, kept["turn_id"])).status_code == 200
