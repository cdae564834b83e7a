"""``ferryman agents|sessions|turns|chat`` against a running server (its model scripted), human and ``--json``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from cli_support import cli

from ferryman.client import Agent, Client, client_tool
from ferryman.client.events import TurnCompleted
from ferryman.testing import ScriptedError, ScriptedReply, ScriptedServerClient, ScriptedToolCall
from support import create_agent, create_session


def _agent(capsys: pytest.CaptureFixture[str], base: str, *extra: str) -> str:
    created = cli(capsys, base, "agents", "create", "--model", "scripted-model", "--name", "helper", *extra, "--json")
    return str(created.json()["agent_id"])


def test_agents_are_created_listed_shown_and_deleted(capsys: pytest.CaptureFixture[str], served_base_url: str) -> None:
    base = served_base_url
    agent_id = _agent(capsys, base, "--instructions", "Be brief.", "--toolgroup", "builtin::math")

    listed = cli(capsys, base, "agents", "list", "--json").json()
    assert agent_id in [agent["agent_id"] for agent in listed]
    shown = cli(capsys, base, "agents", "show", agent_id, "--json").json()
    config = shown["agent_config"]
    assert (config["model"], config["instructions"], config["name"]) == ("scripted-model", "Be brief.", "helper")
    assert config["toolgroups"] == ["builtin::math"]

    table = cli(capsys, base, "agents", "list")
    assert table.code == 0 and agent_id in table.out and "helper" in table.out
    human = cli(capsys, base, "agents", "show", agent_id)
    assert human.code == 0 and "Be brief." in human.out and "builtin::math" in human.out

    deleted = cli(capsys, base, "agents", "delete", agent_id, "--json").json()
    assert deleted == {"agent_id": agent_id, "deleted": True}
    gone = cli(capsys, base, "agents", "show", agent_id)
    assert gone.code == 1 and gone.out == ""
    assert gone.err.startswith("error: not_found: ") and gone.err.count("\n") == 1


def test_sessions_are_listed_and_shown_with_their_turns(
    capsys: pytest.CaptureFixture[str], served_base_url: str, served_model: ScriptedServerClient
) -> None:
    base = served_base_url
    agent_id = _agent(capsys, base)
    with httpx.Client(base_url=base) as http:
        session_id = create_session(http, agent_id, "first")
    served_model.enqueue(ScriptedReply(text="Hello there."))
    assert cli(capsys, base, "chat", "--agent", agent_id, "--session", session_id, "Hi", "--json").code == 0

    sessions = cli(capsys, base, "sessions", "list", agent_id, "--json").json()
    assert [(s["session_id"], s["session_name"]) for s in sessions] == [(session_id, "first")]
    session = cli(capsys, base, "sessions", "show", agent_id, session_id, "--json").json()
    assert [turn["output_message"]["content"] for turn in session["turns"]] == ["Hello there."]
    human = cli(capsys, base, "sessions", "show", agent_id, session_id)
    assert human.code == 0 and session["turns"][0]["turn_id"] in human.out and "Hello there." in human.out


def test_a_turn_shows_as_a_step_timeline_and_replays_its_events(
    capsys: pytest.CaptureFixture[str], served_base_url: str, served_model: ScriptedServerClient
) -> None:
    base = served_base_url
    agent_id = _agent(capsys, base, "--toolgroup", "builtin::math")
    served_model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="calculator", arguments={"expression": "6 * 7"})]),
        ScriptedReply(text="It is 42."),
    )
    chat = cli(capsys, base, "chat", "--agent", agent_id, "What is 6 times 7?", "--json").json()
    [turn] = chat["turns"]
    assert turn["output"] == "It is 42."
    ids = (agent_id, chat["session_id"], turn["turn_id"])

    timeline = cli(capsys, base, "turns", "show", *ids, "--json").json()
    assert timeline["status"] == "completed" and timeline["output"] == "It is 42."
    steps = timeline["steps"]
    assert [step["step_type"] for step in steps] == ["inference", "tool_execution", "inference"]
    assert steps[1]["details"] == ['call calculator({"expression": "6 * 7"})', "  ← 42"]
    assert all(step["duration_s"] is not None and step["duration_s"] >= 0 for step in steps)
    human = cli(capsys, base, "turns", "show", *ids)
    assert human.code == 0 and "tool_execution" in human.out and "calculator" in human.out

    events = cli(capsys, base, "turns", "replay", *ids, "--json").json()
    kinds = [event["event"]["payload"]["event_type"] for event in events]
    assert kinds[0] == "turn_start" and kinds[-1] == "turn_complete"
    assert kinds.count("step_complete") == 3
    replayed = cli(capsys, base, "turns", "replay", *ids)
    assert replayed.code == 0 and "calculator" in replayed.out and "It is 42." in replayed.out


def test_a_turn_paused_for_a_client_tool_and_resumed_replays_whole(
    capsys: pytest.CaptureFixture[str], served_base_url: str, served_model: ScriptedServerClient
) -> None:
    @client_tool
    def ferry_time(harbour: str) -> str:
        """The next ferry's departure.

        Args:
            harbour: Where from.
        """
        return f"{harbour}: 09:00"

    served_model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="ferry_time", arguments={"harbour": "Kiel"})]),
        ScriptedReply(text="At nine."),
    )
    with Client(base_url=served_base_url, max_retries=0) as sdk:
        agent = Agent(sdk, "scripted-model", "Be brief.", tools=[ferry_time])
        session_id = agent.create_session()
        done = list(agent.create_turn("Next ferry from Kiel?"))[-1]
    assert isinstance(done, TurnCompleted)
    ids = (str(agent.agent_id), session_id, done.turn_id)

    events = cli(capsys, served_base_url, "turns", "replay", *ids, "--json").json()
    kinds = [event["event"]["payload"]["event_type"] for event in events]
    assert "turn_awaiting_input" in kinds and kinds[-1] == "turn_complete"
    steps = [event["event"]["payload"]["step_details"]["step_type"] for event in events if
             event["event"]["payload"]["event_type"] == "step_complete"]  # fmt: skip
    assert steps == ["inference", "tool_execution", "inference"]
    replayed = cli(capsys, served_base_url, "turns", "replay", *ids)
    assert replayed.code == 0, replayed.err
    assert "ferry_time" in replayed.out and "Kiel: 09:00" in replayed.out and "At nine." in replayed.out


def test_chat_shows_tool_calls_as_they_happen(
    capsys: pytest.CaptureFixture[str], served_base_url: str, served_model: ScriptedServerClient
) -> None:
    served_model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall(name="calculator", arguments={"expression": "2 + 2"})]),
        ScriptedReply(text="Four."),
    )
    ran = cli(capsys, served_base_url, "chat", "--model", "scripted-model", "--toolgroup", "builtin::math", "2+2?")
    assert ran.code == 0, ran.err
    assert "calculator" in ran.out and "Four." in ran.out
    assert "scripted-model" in ran.err  # the banner: model, agent and session, off stdout


def test_a_failed_turn_is_an_error_line_and_exit_code_1(
    capsys: pytest.CaptureFixture[str], served_base_url: str, served_model: ScriptedServerClient
) -> None:
    served_model.enqueue(ScriptedReply(error=ScriptedError(status_code=400, message="bad prompt")))
    ran = cli(capsys, served_base_url, "chat", "--model", "scripted-model", "Hi", "--json")
    assert ran.code == 1
    [turn] = json.loads(ran.out)["turns"]
    assert turn["status"] == "failed" and turn["error"]["code"]
    assert ran.err.splitlines()[-1] == f"error: {turn['error']['code']}: {turn['error']['message']}"


def test_errors_are_one_line_with_an_exit_code(capsys: pytest.CaptureFixture[str], served_base_url: str) -> None:
    missing = cli(capsys, served_base_url, "sessions", "list", "no-such-agent")
    assert (missing.code, missing.out) == (1, "")
    assert missing.err.startswith("error: not_found: ") and missing.err.count("\n") == 1
    invalid = cli(capsys, served_base_url, "agents", "create", "--model", "")
    assert invalid.code == 1 and invalid.err.startswith("error: invalid_request: ")
    unreachable = cli(capsys, "http://127.0.0.1:9", "agents", "list", "--json")
    assert (unreachable.code, unreachable.out) == (2, "")
    assert unreachable.err.startswith("error: cannot reach http://127.0.0.1:9") and unreachable.err.count("\n") == 1


def test_the_entry_point_runs_a_command(served_base_url: str) -> None:
    env = {**os.environ, "FERRYMAN_URL": served_base_url}
    command = [sys.executable, "-m", "ferryman.cli.main", "models", "list", "--json"]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, env=env)
    assert ran.returncode == 0, ran.stderr
    assert "scripted-model" in ran.stdout


def test_the_short_ids_chat_prints_are_accepted_everywhere(
    capsys: pytest.CaptureFixture[str], served_base_url: str, served_model: ScriptedServerClient
) -> None:
    base = served_base_url
    served_model.enqueue(ScriptedReply(text="Hello."))
    first = cli(capsys, base, "chat", "--model", "scripted-model", "Hi")
    assert first.code == 0, first.err
    banner = re.search(r"agent ([0-9a-f]{8}) · session ([0-9a-f]{8})", first.err)
    assert banner is not None, first.err
    agent8, session8 = banner.groups()

    agent_id = cli(capsys, base, "agents", "show", agent8, "--json").json()["agent_id"]
    assert agent_id.startswith(agent8) and len(agent_id) > 8
    [session] = cli(capsys, base, "sessions", "list", agent8, "--json").json()
    assert session["session_id"].startswith(session8)
    [turn] = cli(capsys, base, "sessions", "show", agent8, session8, "--json").json()["turns"]
    timeline = cli(capsys, base, "turns", "show", agent8, session8, turn["turn_id"][:6], "--json").json()
    assert timeline["turn_id"] == turn["turn_id"] and timeline["output"] == "Hello."

    served_model.enqueue(ScriptedReply(text="Again."))
    again = cli(capsys, base, "chat", "--agent", agent8, "--session", session8, "Again?", "--json")
    assert again.err == ""  # with --json: no banner, nothing but the document
    assert (again.json()["agent_id"], again.json()["session_id"]) == (agent_id, session["session_id"])


def test_chat_sends_its_multitask_strategy(
    capsys: pytest.CaptureFixture[str], served_base_url: str, served_model: ScriptedServerClient
) -> None:
    base = served_base_url
    agent_id = _agent(capsys, base)
    with httpx.Client(base_url=base) as http:
        session_id = create_session(http, agent_id, "busy")
    served_model.enqueue(ScriptedReply(text="never", gate="held"), ScriptedReply(text="Instead."))
    url = f"{base}/v1/agents/{agent_id}/session/{session_id}/turn"
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(httpx.post, url, json={"messages": [{"role": "user", "content": "one"}]}, timeout=60)
        served_model.wait_for_requests(1)
        chat = ("chat", "--agent", agent_id, "--session", session_id)
        refused = cli(capsys, base, *chat, "two")
        assert refused.code == 1 and "\nerror: conflict: " in refused.err, refused.err  # the default: reject
        ran = cli(capsys, base, *chat, "--multitask-strategy", "interrupt", "never mind", "--json")
        assert [turn["output"] for turn in ran.json()["turns"]] == ["Instead."]
        cancelled = held.result()
    assert cancelled.status_code == 409 and cancelled.json()["error"]["code"] == "cancelled", cancelled.text
    served_model.open_gate("held")


def test_an_ambiguous_prefix_is_one_line_and_exit_code_1(
    capsys: pytest.CaptureFixture[str], served_base_url: str
) -> None:
    with httpx.Client(base_url=served_base_url) as http:
        for _ in range(17):  # two of them, at least, begin with the same hex digit
            create_agent(http)
    listed = cli(capsys, served_base_url, "agents", "list", "--json").json()
    digit, count = Counter(agent["agent_id"][0] for agent in listed).most_common(1)[0]
    ran = cli(capsys, served_base_url, "agents", "show", digit)
    assert (ran.code, ran.out) == (1, "")
    [line] = ran.err.splitlines()
    assert line.startswith(f"error: agent id prefix '{digit}' is ambiguous: {count} agents begin with it (")


def test_json_into_a_closed_pipe_ends_quietly(served_base_url: str) -> None:
    with httpx.Client(base_url=served_base_url) as http:
        create_agent(http)
    command = [sys.executable, "-m", "ferryman.cli.main", "agents", "list", "--json", "--url", served_base_url]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # `| head -1` that has read its line, before this writes
        errors = process.stderr.read().decode()
        status = process.wait(timeout=120)
    assert (status, errors) == (141, "")
