"""Double-texting across two replicas over one PostgreSQL and one Redis (issue #27, item 3).

A turn held at the scripted model's gate runs on replica A; turns sent to replica B with a
``multitask_strategy`` queue behind it or interrupt it, wherever each runs.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from integration_helpers import message_text, run_turn, session_url, wait_for
from test_replicas import Pair, held_turn, pair, replica_pair  # noqa: F401  (fixtures: the two replicas)

from ferryman.testing import ScriptedReply, ScriptedServerClient
from support import create_agent, create_session


def _texts(request: dict[str, Any]) -> list[str]:
    return [message_text(m) for m in request["messages"] if m["role"] in ("user", "assistant") and message_text(m)]


def _statuses(http: httpx.Client, agent_id: str, session_id: str, count: int) -> list[str] | None:
    turns = http.get(session_url(agent_id, session_id)).json()["turns"]
    return [t["status"] for t in turns] if len(turns) >= count else None


def test_turns_enqueued_on_both_replicas_run_after_the_running_one_in_order(
    pair: Pair,  # noqa: F811
    served_model: ScriptedServerClient,
) -> None:
    agent_id = create_agent(pair.a)
    session_id = create_session(pair.a, agent_id)
    with ThreadPoolExecutor(2) as pool, held_turn(pair.a, served_model, agent_id, session_id) as held:
        served_model.enqueue(ScriptedReply(text="second answer"), ScriptedReply(text="third answer"))
        second = pool.submit(run_turn, pair.b, agent_id, session_id, "second", multitask_strategy="enqueue")
        wait_for(lambda: _statuses(pair.a, agent_id, session_id, 2), what="the second turn queued")
        third = pool.submit(run_turn, pair.a, agent_id, session_id, "third", multitask_strategy="enqueue")
        statuses = wait_for(lambda: _statuses(pair.b, agent_id, session_id, 3), what="the third turn queued")
        assert statuses == ["in_progress", "queued", "queued"]
        assert len(served_model.requests()) == 1, "a queued turn calls no model"
        served_model.open_gate(held.gate)
        assert list(held.frames)[-1][1]["event"]["payload"]["event_type"] == "turn_complete"
        assert second.result()["status"] == "completed"
        assert third.result()["status"] == "completed"
    requests = served_model.requests()
    assert _texts(requests[1]) == ["question", "held at the gate", "second"]
    assert _texts(requests[2]) == ["question", "held at the gate", "second", "second answer", "third"]


def test_a_turn_sent_to_one_replica_interrupts_the_turn_running_on_the_other(
    pair: Pair,  # noqa: F811
    served_model: ScriptedServerClient,
) -> None:
    agent_id = create_agent(pair.a)
    session_id = create_session(pair.a, agent_id)
    with held_turn(pair.a, served_model, agent_id, session_id) as held:
        served_model.enqueue(ScriptedReply(text="instead"))
        turn = run_turn(pair.b, agent_id, session_id, "never mind", multitask_strategy="interrupt")
        assert turn["status"] == "completed"
        last = list(held.frames)[-1][1]
        assert last["error"]["code"] == "cancelled" and last["error"]["turn_id"] == held.turn_id, last
    turns = pair.a.get(session_url(agent_id, session_id)).json()["turns"]
    assert [(t["turn_id"], t["status"]) for t in turns] == [(held.turn_id, "failed"), (turn["turn_id"], "completed")]
    assert turns[0]["error"]["code"] == "cancelled"
    assert _texts(served_model.requests()[1]) == ["never mind"], "a cancelled turn is not in the history"
