"""Durability: state outlives the server process, paused turns resume on a new one, crashes are reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from integration_helpers import (
    gate_name,
    iter_frames,
    message_text,
    open_gate_finally,
    resume,
    run_turn,
    session_url,
    tool_response,
    turn_url,
    user,
    wait_for_requests,
)

from ferryman.testing import ScriptedServerClient
from support import WEATHER_TOOL, Proc, create_agent, create_session, ferryman_server, running


def _snapshot(http: httpx.Client, agent_id: str, session_id: str, turn_ids: list[str]) -> dict[str, Any]:
    """Everything a client can read about one agent."""
    agents = http.get("/v1/agents").json()
    return {
        "agents": agents,
        "agent": http.get(f"/v1/agents/{agent_id}").json(),
        "sessions": http.get(f"/v1/agents/{agent_id}/sessions").json(),
        "session": http.get(session_url(agent_id, session_id)).json(),
        "turns": [http.get(turn_url(agent_id, session_id, t)).json() for t in turn_ids],
    }


def test_state_survives_a_restart_and_a_paused_turn_resumes_on_the_new_process(
    tmp_path: Path, scripted_proc: tuple[Proc, str], served_model: ScriptedServerClient
) -> None:
    db = tmp_path / "durable.db"
    proc, base = ferryman_server(tmp_path, scripted_proc[1], db)
    with running(proc):
        with httpx.Client(base_url=base, timeout=30) as http:
            agent_id = create_agent(http, client_tools=[WEATHER_TOOL], name="survivor")
            session_id = create_session(http, agent_id, "before restart")
            served_model.enqueue_text("Hello Ada.")
            done = run_turn(http, agent_id, session_id, "I am Ada.")
            served_model.enqueue_tool_call("get_weather", {"city": "Paris"})
            paused = run_turn(http, agent_id, session_id, "weather in Paris?")
            assert paused["status"] == "awaiting_input"
            before = _snapshot(http, agent_id, session_id, [done["turn_id"], paused["turn_id"]])
            steps_before = [
                http.get(f"{turn_url(agent_id, session_id, done['turn_id'])}/step/{s['step_id']}").json()
                for s in done["steps"]
            ]

        proc.stop()
        proc.start()

        with httpx.Client(base_url=base, timeout=30) as http:
            after = _snapshot(http, agent_id, session_id, [done["turn_id"], paused["turn_id"]])
            assert after == before
            assert [a["agent_id"] for a in after["agents"]["data"]] == [agent_id]
            assert [s["session_id"] for s in after["sessions"]["data"]] == [session_id]
            assert [t["status"] for t in after["session"]["turns"]] == ["completed", "awaiting_input"]
            steps_after = [
                http.get(f"{turn_url(agent_id, session_id, done['turn_id'])}/step/{s['step_id']}").json()
                for s in done["steps"]
            ]
            assert steps_after == steps_before

            [call] = paused["output_message"]["tool_calls"]
            served_model.enqueue_text("Sunny in Paris, Ada.")
            response = resume(http, agent_id, session_id, paused["turn_id"], [tool_response(call, "sunny")])
            assert response.status_code == 200, response.text
            turn = response.json()
            assert turn["turn_id"] == paused["turn_id"]
            assert turn["status"] == "completed"
            assert turn["output_message"]["content"] == "Sunny in Paris, Ada."
            assert [s["step_type"] for s in turn["steps"]] == ["inference", "tool_execution", "inference"]
            assert turn["steps"][1]["tool_responses"][0]["content"] == "sunny"

            last = served_model.requests()[-1]["messages"]
            assert [(m["role"], message_text(m)) for m in last] == [
                ("system", "You are a test agent."),
                ("user", "I am Ada."),
                ("assistant", "Hello Ada."),
                ("user", "weather in Paris?"),
                ("assistant", ""),
                ("tool", "sunny"),
            ]
            assert last[-1]["tool_call_id"] == call["call_id"]

            served_model.enqueue_text("Bye.")
            assert run_turn(http, agent_id, session_id, "bye")["status"] == "completed"


def test_after_a_crash_the_running_turn_is_failed_and_the_paused_one_resumes(
    tmp_path: Path, scripted_proc: tuple[Proc, str], served_model: ScriptedServerClient
) -> None:
    db = tmp_path / "crash.db"
    proc, base = ferryman_server(tmp_path, scripted_proc[1], db)
    gate = gate_name()
    with running(proc), open_gate_finally(served_model, gate):
        with httpx.Client(base_url=base, timeout=30) as http:
            agent_id = create_agent(http, client_tools=[WEATHER_TOOL])
            paused_session = create_session(http, agent_id, "paused")
            served_model.enqueue_tool_call("get_weather", {"city": "Lisbon"})
            paused = run_turn(http, agent_id, paused_session, "weather?")
            assert paused["status"] == "awaiting_input"

            session_id = create_session(http, agent_id, "running")
            served_model.enqueue_text("never delivered", gate=gate)
            body = {"messages": [user("doomed question")], "stream": True}
            with http.stream("POST", turn_url(agent_id, session_id), json=body) as response:
                assert response.status_code == 200
                _, first = next(iter_frames(response))
                turn_id = first["event"]["payload"]["turn_id"]
                wait_for_requests(served_model, 2)
            assert http.get(turn_url(agent_id, session_id, turn_id)).json()["status"] == "in_progress"

        proc.kill()
        proc.start()

        with httpx.Client(base_url=base, timeout=30) as http:
            # SQLite serves one process: what it left running is failed as it starts again,
            # without waiting for the turn's lease (30 s by default) to run out.
            turn = http.get(turn_url(agent_id, session_id, turn_id)).json()
            assert turn["status"] == "failed"
            assert turn["error"]["code"] == "interrupted"
            assert turn["error"]["message"]
            assert turn["completed_at"]

            served_model.enqueue_text("fresh start")
            new_turn = run_turn(http, agent_id, session_id, "try again")
            assert new_turn["status"] == "completed"
            assert new_turn["output_message"]["content"] == "fresh start"
            sent = [message_text(m) for m in served_model.requests()[-1]["messages"]]
            assert "never delivered" not in sent
            turns = http.get(session_url(agent_id, session_id)).json()["turns"]
            assert [t["status"] for t in turns] == ["failed", "completed"]

            # the turn that was waiting for the client is untouched by the crash
            stored = http.get(turn_url(agent_id, paused_session, paused["turn_id"])).json()
            assert stored["status"] == "awaiting_input"
            assert stored["error"] is None
            [call] = stored["output_message"]["tool_calls"]
            served_model.enqueue_text("Lisbon is bright.")
            response = resume(http, agent_id, paused_session, paused["turn_id"], [tool_response(call, "bright")])
            assert response.status_code == 200, response.text
            assert response.json()["status"] == "completed"
            assert response.json()["output_message"]["content"] == "Lisbon is bright."


def test_turn_running_at_a_graceful_stop_is_failed_after_restart(
    tmp_path: Path, scripted_proc: tuple[Proc, str], served_model: ScriptedServerClient
) -> None:
    db = tmp_path / "stop.db"
    proc, base = ferryman_server(tmp_path, scripted_proc[1], db)
    gate = gate_name()
    with running(proc), open_gate_finally(served_model, gate):
        with httpx.Client(base_url=base, timeout=30) as http:
            agent_id = create_agent(http)
            session_id = create_session(http, agent_id)
            served_model.enqueue_text("never delivered", gate=gate)
            body = {"messages": [user("question")], "stream": True}
            with http.stream("POST", turn_url(agent_id, session_id), json=body) as response:
                _, first = next(iter_frames(response))
                turn_id = first["event"]["payload"]["turn_id"]
                wait_for_requests(served_model, 1)

        proc.stop()
        assert proc.process is not None and proc.process.returncode is not None
        proc.start()

        with httpx.Client(base_url=base, timeout=30) as http:
            # SQLite serves one process: what it left running is failed as it starts again,
            # without waiting for the turn's lease (30 s by default) to run out.
            turn = http.get(turn_url(agent_id, session_id, turn_id)).json()
            assert turn["status"] == "failed"
            assert turn["error"]["code"] in ("cancelled", "interrupted")
            served_model.enqueue_text("again")
            assert run_turn(http, agent_id, session_id, "retry")["status"] == "completed"
