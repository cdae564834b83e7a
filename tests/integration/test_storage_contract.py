"""The storage contract: every backend behaves like the SQLite reference, method by method.

Each test gets a fresh, empty store of each backend in ``storage_backends.BACKENDS``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from storage_backends import BACKENDS
from store_records import (
    answer,
    answered,
    complete,
    event,
    finished,
    inference,
    item_ids,
    lease,
    listed_responses,
    new_agent,
    new_conversation,
    new_response,
    new_session,
    pause,
    response_start,
    said,
    sessions_of,
    start,
    stored_session,
    text_item,
    texts,
    turn_event,
    turn_of,
    user,
)

from ferryman.api.agents import (
    TurnError,
)
from ferryman.api.content import (
    CompletionMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
    content_to_text,
)
from ferryman.api.limits import MAX_MESSAGES
from ferryman.api.registry import Model
from ferryman.api.responses import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputText,
    Item,
    McpCallItem,
)
from ferryman.errors import ConflictError, InvalidRequestError, NotFoundError
from ferryman.ids import new_id, utcnow
from ferryman.services.record_guard import owners_of
from ferryman.storage.base import (
    ConversationRecord,
    ExpiredTurn,
    ReadAlong,
    ResponseRecord,
    ResponseStart,
    SessionRecord,
    StepWrite,
    Store,
    StoredEvent,
    TurnRecord,
)
from ferryman.storage.domain import registry
from ferryman.storage.domain.agents import sessions
from ferryman.storage.domain.conversations import conversations
from ferryman.storage.domain.items import item_record_id
from ferryman.storage.domain.kinds import AGENT, ITEM
from ferryman.storage.domain.responses import response_heads
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.ops import Get
from ferryman.storage.sql.kernel import MAX_BATCH

pytestmark = pytest.mark.anyio

ALICE = Owner("api_key", "alice")
BOB = Owner("subject", "bob", {"teams": ("blue",)})


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield opened


# ---- an agent's sessions -------------------------------------------------------


async def test_deleting_each_session_of_an_agent_deletes_its_turns_steps_and_messages(store: Store) -> None:
    # How the agents service deletes an agent's sessions before its record (the record is the kernel's).
    agent = await new_agent(store)
    other = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    second = await new_session(store, agent.agent_id)
    kept = await new_session(store, other.agent_id)
    turn = await start(store, session, "q")
    step = await complete(store, turn, "a")
    kept_turn = await start(store, kept, "q")
    for listed in (await sessions_of(store, agent.agent_id)).items:
        await store.delete_session(agent.agent_id, listed.session_id)
    for gone in (session, second):
        assert await stored_session(store, gone.session_id) is None
    assert (await sessions_of(store, agent.agent_id)).items == []
    assert await store.list_turns([session.session_id, second.session_id]) == []
    with pytest.raises(NotFoundError):
        await store.get_turn_record(session.session_id, turn.turn_id)
    with pytest.raises(NotFoundError):
        await store.get_step(session.session_id, turn.turn_id, step.step_id)
    assert await store.load_history(session.session_id, turn.turn_id) == []
    assert [t.turn_id for t in await store.list_turns([kept.session_id])] == [kept_turn.turn_id]


async def test_a_session_is_stored_whatever_its_agent_id(store: Store) -> None:
    # No backend checks the agent: the service does, in the kernel, before it opens the session.
    session = await new_session(store, "agent_that_the_store_never_saw")
    assert await stored_session(store, session.session_id) == session


# ---- sessions ----------------------------------------------------------------


async def test_a_session_reads_back_as_created_with_its_owner_in_its_record(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id, "my session")
    found = await stored_session(store, session.session_id)
    assert found == session
    assert found is not None and found.started_at.tzinfo is not None
    owned = SessionRecord(new_id(), agent.agent_id, "owned", utcnow())
    await store.create_session(owned, owner=ALICE)
    record = await sessions(store.kernel).find(owned.session_id)
    assert record is not None and record.rec.owner == ALICE


async def test_a_session_id_is_taken_once(store: Store) -> None:
    session = await new_session(store, "agent")
    with pytest.raises(ConflictError, match="already exists"):
        await store.create_session(replace(session, session_name="again"))
    assert await stored_session(store, session.session_id) == session


async def test_a_session_is_deleted_only_by_its_own_agent(store: Store) -> None:
    owner = await new_agent(store)
    stranger = await new_agent(store)
    session = await new_session(store, owner.agent_id)
    with pytest.raises(NotFoundError):
        await store.delete_session(stranger.agent_id, session.session_id)
    assert await stored_session(store, session.session_id) == session


async def test_unknown_session_is_not_found(store: Store) -> None:
    agent = await new_agent(store)
    with pytest.raises(NotFoundError):
        await store.delete_session(agent.agent_id, new_id())


async def test_session_of_no_agent_runs_turns_and_is_listed_under_no_agent(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, None, "response")
    turn = await start(store, session, "q")
    assert (await store.get_turn_record(session.session_id, turn.turn_id)).agent_id is None
    assert (await sessions_of(store, agent.agent_id)).items == []
    assert await stored_session(store, session.session_id) == session


async def test_sessions_are_listed_per_agent_in_creation_order_by_pages(store: Store) -> None:
    agent = await new_agent(store)
    other = await new_agent(store)
    mine: list[SessionRecord] = []
    for n in range(3):
        mine.append(await new_session(store, agent.agent_id, f"s{n}"))
        await new_session(store, other.agent_id)
    first = await sessions_of(store, agent.agent_id, 0, 2)
    assert first.items == mine[:2] and first.has_more
    last = await sessions_of(store, agent.agent_id, 2, 2)
    assert last.items == mine[2:] and not last.has_more
    everything = await sessions_of(store, agent.agent_id)
    assert everything.items == mine and not everything.has_more


async def test_deleting_a_session_deletes_its_turns_only(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    kept = await new_session(store, agent.agent_id)
    turn = await start(store, session, "q")
    step = await complete(store, turn, "a")
    kept_turn = await start(store, kept, "q2")
    await store.delete_session(agent.agent_id, session.session_id)
    assert await stored_session(store, session.session_id) is None
    assert await store.list_turns([session.session_id]) == []
    with pytest.raises(NotFoundError):
        await store.get_turn_record(session.session_id, turn.turn_id)
    with pytest.raises(NotFoundError):
        await store.get_step(session.session_id, turn.turn_id, step.step_id)
    assert await store.load_history(session.session_id, turn.turn_id) == []
    assert (await sessions_of(store, agent.agent_id)).items == [kept]
    assert texts(await store.load_history(kept.session_id, kept_turn.turn_id)) == ["user:q2"]
    with pytest.raises(NotFoundError):
        await store.delete_session(agent.agent_id, session.session_id)


# ---- turns: starting and history -----------------------------------------------


async def test_start_turn_returns_earlier_completed_turns_then_its_own_messages(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    first = await start(store, session, "q1")
    await complete(store, first, "a1")
    second = turn_of(session, "q2")
    own: list[Message] = [SystemMessage(content="be brief"), UserMessage(content="q2", context="a document")]
    history = await store.start_turn(second, own)
    assert history == [user("q1"), said("a1"), *own]


async def test_start_turn_without_loading_history_returns_nothing_but_stores_the_messages(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    first = await start(store, session, "q1")
    await complete(store, first, "a1")
    second = turn_of(session, "q2")
    assert await store.start_turn(second, [user("q2")], load_history=False) == []
    assert texts(await store.load_history(session.session_id, second.turn_id)) == [
        "user:q1",
        "assistant:a1",
        "user:q2",
    ]


async def test_the_history_of_a_turn_not_stored_yet_is_what_a_new_turn_would_continue(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    first = await start(store, session, "q1")
    await complete(store, first, "a1")
    await start(store, session, "q2")  # still running: not history yet
    assert texts(await store.load_history(session.session_id, new_id())) == ["user:q1", "assistant:a1"]


async def test_history_leaves_out_failed_turns(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    failed = await start(store, session, "doomed")
    failed.infer_iters = 1
    await store.save_step(failed.turn_id, answer(failed, "half an answer"), 1)
    failed.status, failed.completed_at = "failed", utcnow()
    failed.error = TurnError(code="upstream_error", message="the model went away")
    await store.finish_turn(failed)
    history = await store.start_turn(turn_of(session, "again"), [user("again")])
    assert texts(history) == ["user:again"]


async def test_history_keeps_each_turn_together_when_an_older_turn_resumes_late(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    paused = await start(store, session, "a?")
    waiting = await pause(store, paused, "calling for a")
    newer = turn_of(session, "b?")
    assert texts(await store.start_turn(newer, [user("b?")])) == ["user:b?"]
    await complete(store, newer, "b!")
    resumed = (await store.claim_resume(session.session_id, paused.turn_id, lease())).record
    await store.save_step(resumed.turn_id, answered(waiting, "sunny"), resumed.infer_iters)
    await complete(store, resumed, "a!")
    latest = await store.start_turn(turn_of(session, "c?"), [user("c?")])
    assert texts(latest) == [
        "user:a?",
        "assistant:calling for a",
        "tool:sunny",
        "assistant:a!",
        "user:b?",
        "assistant:b!",
        "user:c?",
    ]


async def test_load_history_of_a_resumed_turn_ends_with_its_own_messages(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    done = await start(store, session, "q1")
    await complete(store, done, "a1")
    paused = await start(store, session, "q2")
    waiting = await pause(store, paused, "calling")
    await store.claim_resume(session.session_id, paused.turn_id, lease())
    await store.save_step(paused.turn_id, answered(waiting, "42"), paused.infer_iters)
    history = await store.load_history(session.session_id, paused.turn_id)
    assert texts(history) == ["user:q1", "assistant:a1", "user:q2", "assistant:calling", "tool:42"]
    assert history[3] == said("calling", *waiting.tool_calls)


async def test_turn_messages_are_each_named_turns_own_in_one_read(store: Store) -> None:
    agent_id = (await new_agent(store)).agent_id
    session = await new_session(store, agent_id)
    done = await start(store, session, "q1")
    await complete(store, done, "a1")
    paused = await start(store, session, "q2")
    waiting = await pause(store, paused, "calling")
    failed = turn_of(session, "q3")
    await store.start_turn(failed, [user("q3")], load_history=False)
    failed.status, failed.completed_at = "failed", utcnow()
    await store.finish_turn(failed)
    other = await start(store, await new_session(store, agent_id), "elsewhere")
    owned = await store.turn_messages(
        session.session_id, [failed.turn_id, paused.turn_id, done.turn_id, other.turn_id, new_id()]
    )
    assert {turn_id: texts(messages) for turn_id, messages in owned.items()} == {
        done.turn_id: ["user:q1", "assistant:a1"],
        paused.turn_id: ["user:q2", "assistant:calling"],
        failed.turn_id: ["user:q3"],
    }
    assert owned[paused.turn_id][1] == said("calling", *waiting.tool_calls)
    assert await store.turn_messages(session.session_id, []) == {}


async def test_second_running_turn_in_a_session_conflicts(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    await start(store, session, "first")
    rejected = turn_of(session, "second")
    with pytest.raises(ConflictError):
        await store.start_turn(rejected, [user("second")])
    with pytest.raises(NotFoundError):
        await store.get_turn_record(session.session_id, rejected.turn_id)
    await start(store, await new_session(store, agent.agent_id), "elsewhere")


async def test_a_turn_may_start_once_the_running_one_completed(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    await complete(store, await start(store, session, "first"), "done")
    second = await start(store, session, "second")
    assert (await store.get_turn_record(session.session_id, second.turn_id)).status == "in_progress"


async def test_start_turn_in_an_unknown_session_is_not_found(store: Store) -> None:
    agent = await new_agent(store)
    ghost = SessionRecord(new_id(), agent.agent_id, "ghost", utcnow())
    with pytest.raises(NotFoundError):
        await store.start_turn(turn_of(ghost, "q"), [user("q")])


async def test_start_turn_under_another_agent_is_not_found(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    stranger = await new_agent(store)
    record = turn_of(session, "q")
    record.agent_id = stranger.agent_id
    with pytest.raises(NotFoundError):
        await store.start_turn(record, [user("q")])


# ---- turns: resuming -------------------------------------------------------------


async def test_claim_resume_moves_an_awaiting_turn_back_to_running(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = turn_of(session, "q")
    record.overrides = {"toolgroups": ["builtin::calculator"], "tool_config": {"tool_choice": "auto"}}
    await store.start_turn(record, [user("q")])
    await pause(store, record, "calling")
    claimed = (await store.claim_resume(session.session_id, record.turn_id, lease())).record
    assert claimed.status == "in_progress"
    assert (claimed.turn_id, claimed.overrides, claimed.input_messages, claimed.infer_iters) == (
        record.turn_id,
        record.overrides,
        record.input_messages,
        1,
    )
    assert (await store.get_turn_record(session.session_id, record.turn_id)).status == "in_progress"


async def test_claim_resume_stores_the_overrides_of_the_run_it_starts(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = turn_of(session, "q")
    record.overrides = {"toolgroups": ["builtin::calculator"], "webhook": {"url": "http://a/1", "run": "t.0"}}
    await store.start_turn(record, [user("q")])
    await pause(store, record, "calling")
    kept = {"toolgroups": ["builtin::calculator"], "webhook": {"url": "http://b/2", "run": "t.3"}}
    claimed = (await store.claim_resume(session.session_id, record.turn_id, lease(), overrides=kept)).record
    assert claimed.overrides == kept
    assert (await store.get_turn_record(session.session_id, record.turn_id)).overrides == kept
    await pause(store, claimed, "calling again")
    refused = turn_of(session, "other")  # a conflicting claim changes nothing
    await store.start_turn(refused, [user("other")])
    with pytest.raises(ConflictError):
        await store.claim_resume(session.session_id, record.turn_id, lease(), overrides={})
    assert (await store.get_turn_record(session.session_id, record.turn_id)).overrides == kept


async def test_a_failed_expired_turn_names_its_session(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = turn_of(session, "q")
    record.lease_until = lease(-1)
    await store.start_turn(record, [user("q")])
    (expired,) = await store.fail_expired_turns(utcnow(), "gone")
    assert (expired.turn_id, expired.session_id) == (record.turn_id, session.session_id)


async def test_claim_resume_of_a_turn_not_awaiting_input_conflicts(store: Store) -> None:
    agent = await new_agent(store)
    running_session = await new_session(store, agent.agent_id)
    running = await start(store, running_session, "q")
    done_session = await new_session(store, agent.agent_id)
    done = await start(store, done_session, "q")
    await complete(store, done, "a")
    with pytest.raises(ConflictError):
        await store.claim_resume(running_session.session_id, running.turn_id, lease())
    with pytest.raises(ConflictError):
        await store.claim_resume(done_session.session_id, done.turn_id, lease())
    assert (await store.get_turn_record(done_session.session_id, done.turn_id)).status == "completed"


async def test_claim_resume_conflicts_while_another_turn_of_the_session_runs(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    paused = await start(store, session, "a?")
    await pause(store, paused, "calling")
    await start(store, session, "b?")
    with pytest.raises(ConflictError):
        await store.claim_resume(session.session_id, paused.turn_id, lease())
    assert (await store.get_turn_record(session.session_id, paused.turn_id)).status == "awaiting_input"


async def test_claim_resume_of_an_unknown_turn_is_not_found(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    paused = await start(store, session, "q")
    await pause(store, paused, "calling")
    with pytest.raises(NotFoundError):
        await store.claim_resume(session.session_id, new_id(), lease())
    other = await new_session(store, agent.agent_id)
    with pytest.raises(NotFoundError):
        await store.claim_resume(other.session_id, paused.turn_id, lease())


async def test_claim_resume_naming_the_pending_step_refuses_a_turn_that_waits_on_another(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    paused = await start(store, session, "q")
    first = await pause(store, paused, "calling")
    resumed = (await store.claim_resume(session.session_id, paused.turn_id, lease(), pending=first.step_id)).record
    await store.save_step(paused.turn_id, answered(first, "sun"), resumed.infer_iters)
    second = await pause(store, paused, "calling again")
    with pytest.raises(ConflictError, match="answered meanwhile"):  # a resume that read the first pause
        await store.claim_resume(session.session_id, paused.turn_id, lease(), pending=first.step_id)
    assert (await store.get_turn_record(session.session_id, paused.turn_id)).status == "awaiting_input"
    claimed = await store.claim_resume(session.session_id, paused.turn_id, lease(), pending=second.step_id)
    assert claimed.record.status == "in_progress"


async def test_a_claimed_turn_is_put_back_with_the_overrides_it_paused_with(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = turn_of(session, "q")
    record.overrides = {"webhook": {"url": "http://a/1", "run": "t.0"}}
    await store.start_turn(record, [user("q")])
    await pause(store, record, "calling")
    paused = await store.get_turn_record(session.session_id, record.turn_id)
    await store.claim_resume(session.session_id, record.turn_id, lease(), overrides={"webhook": {"url": "http://b"}})
    await store.finish_turn(paused, overrides=paused.overrides)
    back = await store.get_turn_record(session.session_id, record.turn_id)
    assert (back.status, back.overrides) == ("awaiting_input", record.overrides)
    assert (await store.claim_resume(session.session_id, record.turn_id, lease())).record.status == "in_progress"


async def test_resume_point_reads_a_paused_turn_its_steps_and_its_event_count(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    paused = await start(store, session, "q")
    waiting = await pause(store, paused, "calling")
    await store.save_turn_events(paused.turn_id, 0, ['{"n": 0}', '{"n": 1}', '{"n": 2}'])
    point = await store.resume_point(session.agent_id or "", session.session_id, paused.turn_id)
    record = point.record
    assert (record.turn_id, record.status, record.infer_iters) == (paused.turn_id, "awaiting_input", 1)
    assert [step.step_type for step in point.steps] == ["inference"]
    assert point.pending == waiting
    assert point.events == 3


async def test_resume_point_of_another_agents_session_or_another_sessions_turn_is_not_found(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    paused = await start(store, session, "q")
    await pause(store, paused, "calling")
    other = await new_session(store, agent.agent_id)
    with pytest.raises(NotFoundError):
        await store.resume_point((await new_agent(store)).agent_id, session.session_id, paused.turn_id)
    with pytest.raises(NotFoundError):
        await store.resume_point(agent.agent_id, other.session_id, paused.turn_id)
    with pytest.raises(NotFoundError):
        await store.resume_point(agent.agent_id, session.session_id, new_id())


async def test_claim_resume_answers_the_history_and_the_reads_along_in_its_write(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    done = await start(store, session, "q1")
    await complete(store, done, "a1")
    paused = await start(store, session, "q2")
    await pause(store, paused, "calling")
    refused = ReadAlong([Get(AGENT, agent.agent_id)])
    with pytest.raises(ConflictError):  # not queued: nothing written, nothing read
        await store.claim_resume(session.session_id, paused.turn_id, lease(), expected="queued", along=refused)
    assert (refused.written, refused.results) == (False, [])
    along = ReadAlong([Get(AGENT, agent.agent_id)])
    resumed = await store.claim_resume(session.session_id, paused.turn_id, lease(), load_history=True, along=along)
    assert resumed.record.status == "in_progress"
    assert texts(resumed.history) == ["user:q1", "assistant:a1", "user:q2", "assistant:calling"]
    assert along.written and [found.id for found in along.results] == [agent.agent_id]


# ---- turns: queued turns and deleting one ------------------------------------


async def test_a_queued_turn_waits_beside_a_running_one_and_is_claimed_once_it_ended(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    running = await start(store, session, "first")
    queued = turn_of(session, "second")
    queued.status = "queued"
    assert await store.start_turn(queued, [user("second")], load_history=False) == []
    with pytest.raises(ConflictError):
        await store.claim_resume(session.session_id, queued.turn_id, lease(), expected="queued")
    await complete(store, running, "one")
    with pytest.raises(ConflictError):  # queued, not awaiting input
        await store.claim_resume(session.session_id, queued.turn_id, lease())
    claimed = (await store.claim_resume(session.session_id, queued.turn_id, lease(), expected="queued")).record
    assert claimed.status == "in_progress"
    assert texts(await store.load_history(session.session_id, queued.turn_id)) == [
        "user:first",
        "assistant:one",
        "user:second",
    ]
    with pytest.raises(ConflictError):
        await store.claim_resume(session.session_id, queued.turn_id, lease(), expected="queued")


async def queue(store: Store, session: SessionRecord, text: str, until: datetime | None = None) -> TurnRecord:
    """Store a queued turn with the user message ``text``."""
    record = turn_of(session, text)
    record.status = "queued"
    if until is not None:
        record.lease_until = until
    await store.start_turn(record, [user(text)], load_history=False)
    return record


async def test_a_new_running_turn_does_not_overtake_a_queued_one(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    first = await start(store, session, "first")
    second = await queue(store, session, "second")
    await complete(store, first, "one")
    with pytest.raises(ConflictError, match="queued"):  # the session runs nothing, yet the second waits
        await start(store, session, "third")
    await store.claim_resume(session.session_id, second.turn_id, lease(), expected="queued")
    await complete(store, second, "two")
    third = await start(store, session, "third")
    assert [t.turn_id for t in await store.list_turns([session.session_id])] == [
        first.turn_id,
        second.turn_id,
        third.turn_id,
    ]


async def test_session_queue_names_the_running_turn_then_the_queued_ones_oldest_first(store: Store) -> None:
    agent = await new_agent(store)
    session, other = await new_session(store, agent.agent_id), await new_session(store, agent.agent_id)
    done = await start(store, session, "done")
    await complete(store, done, "a")
    running = await start(store, session, "running")
    waiting = [await queue(store, session, f"queued {n}") for n in range(3)]
    await queue(store, other, "elsewhere")
    assert await store.session_queue(session.session_id) == [
        (running.turn_id, "in_progress"),
        *[(turn.turn_id, "queued") for turn in waiting],
    ]
    cancelled = waiting[0]
    cancelled.status, cancelled.completed_at = "failed", utcnow()
    cancelled.error = TurnError(code="cancelled", message="stopped")
    await store.finish_turn(cancelled)
    await store.delete_turn(session.session_id, waiting[2].turn_id)
    await complete(store, running, "b")
    assert await store.session_queue(session.session_id) == [(waiting[1].turn_id, "queued")]
    await store.claim_resume(session.session_id, waiting[1].turn_id, lease(), expected="queued")
    assert await store.session_queue(session.session_id) == [(waiting[1].turn_id, "in_progress")]
    await complete(store, waiting[1], "c")
    assert await store.session_queue(session.session_id) == []
    await start(store, session, "next")  # nothing waits any more


async def test_turn_response_names_the_response_a_turn_runs_for(store: Store) -> None:
    conversation = await new_conversation(store)
    ran, ran_turn = await new_response(store, "first", conversation)
    await complete(store, ran_turn, "one")
    running, turn = await new_response(store, "second", conversation)
    session_id = conversation.session_id
    assert await store.turn_response(session_id, turn.turn_id) == running.response.id
    assert await store.turn_response(session_id, ran_turn.turn_id) == ran.response.id
    assert await store.turn_response((await new_session(store, None)).session_id, turn.turn_id) is None
    assert await store.turn_response(session_id, new_id()) is None
    session = await new_session(store, (await new_agent(store)).agent_id)
    assert await store.turn_response(session.session_id, (await start(store, session, "agents")).turn_id) is None
    await store.delete_response(running.response.id)
    assert await store.turn_response(session_id, turn.turn_id) is None


async def test_the_lease_sweep_and_renewal_cover_queued_turns(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    await complete(store, await start(store, session, "first"), "one")
    waiting = await queue(store, session, "second", until=lease(5))
    assert await store.renew_leases([waiting.turn_id], lease(120)) == []
    assert await store.fail_expired_turns(lease(60), "too late") == []
    assert await store.fail_expired_turns(lease(180), "too late") == [ExpiredTurn(waiting.turn_id)]
    failed = await store.get_turn_record(session.session_id, waiting.turn_id)
    assert (failed.status, failed.error) == ("failed", TurnError(code="interrupted", message="too late"))
    assert await store.session_queue(session.session_id) == []
    assert await store.renew_leases([waiting.turn_id], lease(240)) == [waiting.turn_id]
    await start(store, session, "third")  # the failed turn no longer holds the queue


async def test_a_turns_owner_is_stored_with_it_and_goes_with_it(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    first, second, unowned = turn_of(session, "q1"), turn_of(session, "q2"), turn_of(session, "q3")
    await store.start_turn(first, [user("q1")], owner=ALICE)
    await complete(store, first, "a1")
    await store.start_turn(second, [user("q2")], owner=BOB)
    await complete(store, second, "a2")
    await store.start_turn(unowned, [user("q3")])
    await complete(store, unowned, "a3")
    ids = [first.turn_id, second.turn_id, unowned.turn_id, "turn_missing", first.turn_id]
    assert await store.turn_owners(ids) == {first.turn_id: ALICE, second.turn_id: BOB}
    assert await store.turn_owners([]) == {}
    await store.delete_turn(session.session_id, second.turn_id)
    assert await store.turn_owners(ids) == {first.turn_id: ALICE}
    await store.delete_session(session.agent_id or "", session.session_id)
    assert await store.turn_owners(ids) == {}
    record, turn = await new_response(store, "q")
    assert await store.turn_owners([turn.turn_id]) == {}  # started with no owner
    owned = response_start("q")
    await store.start_response(owned, owner=ALICE)
    assert await store.turn_owners([owned.turn.turn_id]) == {owned.turn.turn_id: ALICE}
    await store.delete_response(owned.record.response.id)
    assert await store.turn_owners([owned.turn.turn_id, turn.turn_id]) == {}


async def test_delete_turn_removes_one_turn_with_its_steps_messages_and_events(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    first = await start(store, session, "q1")
    await complete(store, first, "a1")
    dropped = await start(store, session, "q2")
    step = await complete(store, dropped, "a2")
    await store.save_turn_events(dropped.turn_id, 0, [turn_event(0)])
    await store.delete_turn(session.session_id, dropped.turn_id)
    assert [t.turn_id for t in await store.list_turns([session.session_id])] == [first.turn_id]
    with pytest.raises(NotFoundError):
        await store.get_turn_record(session.session_id, dropped.turn_id)
    with pytest.raises(NotFoundError):
        await store.get_step(session.session_id, dropped.turn_id, step.step_id)
    assert await store.turn_events_after(dropped.turn_id, -1) == []
    after = await start(store, session, "q3")
    assert texts(await store.load_history(session.session_id, after.turn_id)) == ["user:q1", "assistant:a1", "user:q3"]
    with pytest.raises(NotFoundError):
        await store.delete_turn(session.session_id, dropped.turn_id)


async def test_delete_turn_refuses_a_running_turn_and_one_of_another_session(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    other = await new_session(store, agent.agent_id)
    running = await start(store, session, "q")
    with pytest.raises(ConflictError):
        await store.delete_turn(session.session_id, running.turn_id)
    with pytest.raises(NotFoundError):
        await store.delete_turn(other.session_id, running.turn_id)
    assert (await store.get_turn_record(session.session_id, running.turn_id)).status == "in_progress"
    running.status, running.completed_at = "failed", utcnow()
    running.error = TurnError(code="cancelled", message="stopped")
    await store.finish_turn(running)
    await store.delete_turn(session.session_id, running.turn_id)
    await start(store, session, "again")  # the session runs turns as before


async def test_delete_turn_of_a_response_deletes_the_response_and_its_input_items(store: Store) -> None:
    earlier = text_item("earlier")
    conversation = await new_conversation(store, earlier)
    record, turn = await new_response(store, "q", conversation=conversation)
    turn.status, turn.completed_at = "failed", utcnow()
    await store.finish_turn(turn)
    await store.delete_turn(conversation.session_id, turn.turn_id)
    with pytest.raises(NotFoundError):
        await store.get_response(record.response.id)
    assert await store.all_items(record.response.id) == []
    assert [item.id for item in await store.all_items(conversation.conversation_id)] == [earlier.id]
    assert await response_heads(store.kernel).find(record.response.id) is None  # no page lists what is gone
    assert (await listed_responses(store, None, 10, "asc", conversation.conversation_id)).items == []


# ---- turns: steps ------------------------------------------------------------------


async def test_save_step_stores_the_step_its_messages_and_the_inference_count(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = await start(store, session, "q")
    write = answer(record, "thinking")
    await store.save_step(record.turn_id, write, 2)
    assert await store.get_step(session.session_id, record.turn_id, write.step.step_id) == write.step
    assert (await store.get_turn_record(session.session_id, record.turn_id)).infer_iters == 2
    assert texts(await store.load_history(session.session_id, record.turn_id)) == ["user:q", "assistant:thinking"]


async def test_save_step_with_the_same_id_replaces_the_pending_step(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = await start(store, session, "q")
    waiting = await pause(store, record, "calling")
    assert await store.pending_step(record.turn_id) == waiting
    await store.claim_resume(session.session_id, record.turn_id, lease())
    write = answered(waiting, "sunny")
    await store.save_step(record.turn_id, write, record.infer_iters)
    assert await store.pending_step(record.turn_id) is None
    assert await store.get_step(session.session_id, record.turn_id, waiting.step_id) == write.step
    [turn] = await store.list_turns([session.session_id])
    assert [s.step_type for s in turn.steps] == ["inference", "tool_execution"]
    assert turn.steps[1] == write.step


async def test_save_step_of_an_unknown_turn_is_not_found(store: Store) -> None:
    record = TurnRecord(new_id(), new_id(), None, "in_progress", [user("q")], utcnow())
    with pytest.raises(NotFoundError):
        await store.save_step(record.turn_id, answer(record, "a"), 1)


async def test_redact_turn_input_replaces_the_turn_input_and_its_history_messages(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    await complete(store, await start(store, session, "q1"), "a1")
    record = await start(store, session, "my key is AKIASECRET")
    # Read once first: a backend that caches decoded history must not serve the old form after.
    assert texts(await store.load_history(session.session_id, record.turn_id))[-1] == "user:my key is AKIASECRET"
    redacted = user("my key is [REDACTED]")
    await store.redact_turn_input(record.turn_id, [redacted], [redacted])
    assert (await store.get_turn_record(session.session_id, record.turn_id)).input_messages == [redacted]
    await store.save_step(record.turn_id, answer(record, "noted"), 1)
    expected = ["user:q1", "assistant:a1", "user:my key is [REDACTED]", "assistant:noted"]
    assert texts(await store.load_history(session.session_id, record.turn_id)) == expected
    await complete(store, record, "done")
    later = turn_of(session, "next")
    history = await store.start_turn(later, [user("next")])
    assert "AKIASECRET" not in json.dumps([m.model_dump(mode="json") for m in history])
    listed = await store.list_turns([session.session_id], [record.turn_id])
    assert "AKIASECRET" not in listed[0].model_dump_json()


async def test_redact_turn_input_of_a_turn_no_longer_running_conflicts(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = await start(store, session, "q")
    await complete(store, record, "a")
    with pytest.raises(ConflictError):
        await store.redact_turn_input(record.turn_id, [user("x")], [user("x")])
    assert (await store.get_turn_record(session.session_id, record.turn_id)).input_messages == [user("q")]
    with pytest.raises(NotFoundError):
        await store.redact_turn_input(new_id(), [user("x")], [user("x")])


async def test_pending_step_is_none_without_a_pending_step(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = await start(store, session, "q")
    await complete(store, record, "a")
    assert await store.pending_step(record.turn_id) is None
    assert await store.pending_step(new_id()) is None


async def test_pending_steps_are_left_out_of_listed_turns_but_found_by_id(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = await start(store, session, "q")
    waiting = await pause(store, record, "calling")
    [turn] = await store.list_turns([session.session_id])
    assert turn.status == "awaiting_input"
    assert [s.step_type for s in turn.steps] == ["inference"]
    assert await store.get_step(session.session_id, record.turn_id, waiting.step_id) == waiting


async def test_get_step_of_an_unknown_step_or_another_session_is_not_found(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    record = await start(store, session, "q")
    step = await complete(store, record, "a")
    other = await new_session(store, agent.agent_id)
    with pytest.raises(NotFoundError):
        await store.get_step(session.session_id, record.turn_id, new_id())
    with pytest.raises(NotFoundError):
        await store.get_step(other.session_id, record.turn_id, step.step_id)
    with pytest.raises(NotFoundError):
        await store.get_step(session.session_id, new_id(), step.step_id)


# ---- turns: finishing and reading ------------------------------------------------


async def test_finish_turn_with_a_last_step_stores_the_step_and_its_messages(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = await start(store, session, "q")
    step = await complete(store, record, "a")
    [turn] = await store.list_turns([session.session_id])
    assert (turn.status, turn.steps, turn.output_message) == ("completed", [step], said("a"))
    assert texts(await store.load_history(session.session_id, record.turn_id)) == ["user:q", "assistant:a"]


async def test_finish_turn_without_a_last_step_keeps_the_steps_saved_before(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = await start(store, session, "q")
    write = answer(record, "a")
    await store.save_step(record.turn_id, write, 1)
    record.status, record.output_message, record.completed_at, record.infer_iters = "completed", said("a"), utcnow(), 1
    await store.finish_turn(record)
    [turn] = await store.list_turns([session.session_id])
    assert (turn.status, turn.steps) == ("completed", [write.step])
    assert texts(await store.load_history(session.session_id, record.turn_id)) == ["user:q", "assistant:a"]


async def test_completed_turn_record_round_trips(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    call = ToolCall(call_id=new_id("call"), tool_name="calc", arguments={"expression": "6*7"})
    record = turn_of(session, "q")
    record.input_messages = [user("q"), ToolResponseMessage(call_id=call.call_id, content="42")]
    record.overrides = {"toolgroups": [{"name": "builtin::calculator", "args": {"k": 1}}], "tool_config": {}}
    await store.start_turn(record, [user("q")])
    record.status, record.infer_iters, record.completed_at = "completed", 3, utcnow()
    record.output_message = CompletionMessage(content="42", stop_reason="out_of_tokens", tool_calls=[call])
    await store.finish_turn(record)
    stored = await store.get_turn_record(session.session_id, record.turn_id)
    assert stored == record
    assert stored.started_at.tzinfo is not None and stored.completed_at is not None
    assert stored.completed_at.tzinfo is not None


async def test_failed_turn_record_keeps_its_error(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = await start(store, session, "q")
    record.status, record.completed_at = "failed", utcnow()
    record.error = TurnError(code="upstream_error", message="the model went away")
    await store.finish_turn(record)
    stored = await store.get_turn_record(session.session_id, record.turn_id)
    assert stored == record
    assert stored.output_message is None


async def test_running_turn_record_has_no_completion(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = await start(store, session, "q")
    stored = await store.get_turn_record(session.session_id, record.turn_id)
    assert stored == record
    assert stored.status == "in_progress"
    assert (stored.output_message, stored.error, stored.completed_at) == (None, None, None)


async def test_turn_record_of_an_unknown_turn_or_another_session_is_not_found(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    record = await start(store, session, "q")
    other = await new_session(store, agent.agent_id)
    with pytest.raises(NotFoundError):
        await store.get_turn_record(session.session_id, new_id())
    with pytest.raises(NotFoundError):
        await store.get_turn_record(other.session_id, record.turn_id)


async def test_list_turns_gives_the_turns_of_the_sessions_in_start_order(store: Store) -> None:
    agent = await new_agent(store)
    first, second, unlisted = [await new_session(store, agent.agent_id) for _ in range(3)]
    order = []
    for session in (first, second, unlisted, first):
        record = await start(store, session, "q")
        await complete(store, record, "a")
        order.append(record.turn_id)
    listed = await store.list_turns([first.session_id, second.session_id])
    assert [t.turn_id for t in listed] == [order[0], order[1], order[3]]
    assert [t.session_id for t in listed] == [first.session_id, second.session_id, first.session_id]
    assert await store.list_turns([]) == []


async def test_list_turns_filters_by_turn_ids(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    ids = []
    for n in range(3):
        record = await start(store, session, f"q{n}")
        await complete(store, record, f"a{n}")
        ids.append(record.turn_id)
    picked = await store.list_turns([session.session_id], [ids[2], ids[0]])
    assert [t.turn_id for t in picked] == [ids[0], ids[2]]
    assert await store.list_turns([session.session_id], [new_id()]) == []
    assert await store.list_turns([session.session_id], []) == []


async def test_listed_turn_carries_its_record_and_completed_steps_in_order(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    record = await start(store, session, "q")
    waiting = await pause(store, record, "calling")
    await store.claim_resume(session.session_id, record.turn_id, lease())
    tool = answered(waiting, "sunny")
    await store.save_step(record.turn_id, tool, record.infer_iters)
    last = await complete(store, record, "a")
    [turn] = await store.list_turns([session.session_id])
    assert [s.step_type for s in turn.steps] == ["inference", "tool_execution", "inference"]
    assert turn.steps[1:] == [tool.step, last]
    assert (turn.input_messages, turn.output_message) == ([user("q")], said("a"))
    assert (turn.started_at, turn.completed_at, turn.error) == (record.started_at, record.completed_at, None)


async def test_running_turn_is_listed_with_an_empty_output(store: Store) -> None:
    session = await new_session(store, (await new_agent(store)).agent_id)
    await start(store, session, "q")
    [turn] = await store.list_turns([session.session_id])
    assert (turn.status, turn.steps, turn.completed_at) == ("in_progress", [], None)
    assert content_to_text(turn.output_message.content) == ""


async def test_fail_expired_turns_fails_only_running_turns_whose_lease_ended(store: Store) -> None:
    agent = await new_agent(store)
    sessions = [await new_session(store, agent.agent_id) for _ in range(4)]
    expired = turn_of(sessions[0], "q")
    expired.lease_until = lease(-1)
    await store.start_turn(expired, [user("q")])
    alive = await start(store, sessions[1], "q")
    paused = await start(store, sessions[2], "q")
    await pause(store, paused, "calling")
    done = turn_of(sessions[3], "q")
    done.lease_until = lease(-1)
    await store.start_turn(done, [user("q")])
    await complete(store, done, "a")
    assert await store.fail_expired_turns(utcnow(), "the replica running it stopped") == [ExpiredTurn(expired.turn_id)]
    failed = await store.get_turn_record(sessions[0].session_id, expired.turn_id)
    assert failed.status == "failed"
    assert failed.error == TurnError(code="interrupted", message="the replica running it stopped")
    assert failed.completed_at is not None and failed.completed_at.tzinfo is not None
    assert (await store.get_turn_record(sessions[1].session_id, alive.turn_id)).status == "in_progress"
    assert (await store.get_turn_record(sessions[2].session_id, paused.turn_id)).status == "awaiting_input"
    assert (await store.get_turn_record(sessions[3].session_id, done.turn_id)).status == "completed"
    assert await store.fail_expired_turns(utcnow(), "again") == []
    await start(store, sessions[0], "retry")


async def test_a_renewed_lease_keeps_a_turn_running(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    record = turn_of(session, "q")
    record.lease_until = lease(5)
    await store.start_turn(record, [user("q")])
    unknown = new_id()
    assert await store.renew_leases([record.turn_id, unknown], lease(120)) == [unknown]
    assert await store.fail_expired_turns(lease(60), "too late") == []
    assert await store.fail_expired_turns(lease(180), "too late") == [ExpiredTurn(record.turn_id)]


async def test_renewing_does_not_revive_a_finished_turn(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    record = await start(store, session, "q")
    await complete(store, record, "a")
    assert await store.renew_leases([record.turn_id], lease(120)) == [record.turn_id]
    assert await store.fail_expired_turns(lease(600), "late") == []
    assert (await store.get_turn_record(session.session_id, record.turn_id)).status == "completed"


async def test_a_turn_failed_by_the_sweep_takes_no_more_writes_from_its_old_runner(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    stalled = await start(store, session, "q")
    await store.fail_expired_turns(lease(600), "its replica stalled")
    step = inference(stalled.turn_id, said("late answer"))
    with pytest.raises(ConflictError):
        await store.save_step(stalled.turn_id, StepWrite(step, messages=[step.model_response]), 1)
    late = replace(stalled, status="completed", completed_at=utcnow(), output_message=said("late answer"))
    await store.finish_turn(late, StepWrite(step, messages=[step.model_response]))
    kept = await store.get_turn_record(session.session_id, stalled.turn_id)
    assert (kept.status, kept.error) == ("failed", TurnError(code="interrupted", message="its replica stalled"))
    [turn] = await store.list_turns([session.session_id])
    assert turn.steps == []
    nxt = await start(store, session, "next")
    assert texts(await store.load_history(session.session_id, nxt.turn_id)) == ["user:next"]


async def test_a_resumed_turn_runs_under_the_lease_it_was_claimed_with(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    record = await start(store, session, "q")
    await pause(store, record, "calling")
    assert await store.fail_expired_turns(lease(600), "paused turns hold no lease") == []
    await store.claim_resume(session.session_id, record.turn_id, lease(30))
    assert await store.fail_expired_turns(lease(10), "early") == []
    assert await store.fail_expired_turns(lease(60), "late") == [ExpiredTurn(record.turn_id)]


# ---- models ------------------------------------------------------------------------


def model(identifier: str, provider: str = "openai", **metadata: object) -> Model:
    return Model(
        identifier=identifier,
        provider_id=provider,
        provider_resource_id=f"{provider}/{identifier}",
        model_type="llm",
        metadata=dict(metadata),
    )


async def test_registered_models_come_in_registration_order(store: Store) -> None:
    models = registry.models(store.kernel)
    saved = [model("zeta"), model("alpha", context_length=4096), model("embed", provider="local")]
    saved[2] = saved[2].model_copy(update={"model_type": "embedding"})
    for m in saved:
        await models.upsert(m)
    assert await models.all() == saved


async def test_saving_a_model_again_replaces_it_in_place(store: Store) -> None:
    models = registry.models(store.kernel)
    await models.upsert(model("first"))
    await models.upsert(model("second"))
    replaced = model("first", provider="other", note="moved")
    await models.upsert(replaced)
    assert await models.all() == [replaced, model("second")]


async def test_delete_model_tells_whether_it_existed(store: Store) -> None:
    models = registry.models(store.kernel)
    await models.upsert(model("gone"))
    await models.upsert(model("kept"))
    assert await models.delete("gone") is True
    assert await models.delete("gone") is False
    assert await models.all() == [model("kept")]


# ---- conversations and items --------------------------------------------------------


async def test_conversation_reads_back_with_its_items(store: Store) -> None:
    items: list[Item] = [
        text_item("hello"),
        FunctionCallItem(id=new_id("fc"), call_id="call_1", name="get_weather", arguments='{"city":"Paris"}'),
        FunctionCallOutputItem(id=new_id("fco"), call_id="call_1", output="sunny"),
        text_item("it is sunny", role="assistant"),
    ]
    conversation = await new_conversation(store, *items, metadata={"topic": "weather"})
    assert await conversations(store.kernel).get(conversation.conversation_id) == conversation
    assert await store.all_items(conversation.conversation_id) == items


async def test_unknown_conversation_is_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError):
        await conversations(store.kernel).get("conv_unknown")
    with pytest.raises(NotFoundError):
        await store.delete_conversation("conv_unknown")


async def test_a_conversation_is_stored_with_its_owner(store: Store) -> None:
    session = await new_session(store, None, "conversation")
    record = ConversationRecord(f"conv_{uuid.uuid4().hex}", session.session_id, {"a": "b"}, 1_700_000_000)
    owner = Owner("api_key", "alice", {"teams": ("red",)})
    await store.create_conversation(record, [], owner)
    found = await conversations(store.kernel).find(record.conversation_id)
    assert found is not None and found.value == record
    assert found.rec.owner == owner
    assert found.rec.at == 1_700_000_000
    with pytest.raises(ConflictError):
        await store.create_conversation(record, [], owner)


async def test_deleting_a_conversation_deletes_its_items(store: Store) -> None:
    first = text_item("hello")
    conversation = await new_conversation(store, first)
    kept = await new_conversation(store, text_item("other"))
    await store.delete_conversation(conversation.conversation_id)
    with pytest.raises(NotFoundError):
        await conversations(store.kernel).get(conversation.conversation_id)
    assert await store.all_items(conversation.conversation_id) == []
    with pytest.raises(NotFoundError):
        await store.get_item(conversation.conversation_id, first.id or "")
    assert len(await store.all_items(kept.conversation_id)) == 1
    with pytest.raises(NotFoundError):
        await store.delete_conversation(conversation.conversation_id)


async def test_conversation_with_a_repeated_item_id_is_not_created(store: Store) -> None:
    session = await new_session(store, None, "conversation")
    item = text_item("hello")
    record = ConversationRecord(f"conv_{uuid.uuid4().hex}", session.session_id, {}, int(time.time()))
    with pytest.raises(InvalidRequestError):
        await store.create_conversation(record, [item, item])
    with pytest.raises(NotFoundError):
        await conversations(store.kernel).get(record.conversation_id)
    assert await store.all_items(record.conversation_id) == []


async def test_add_items_appends_after_the_existing_items(store: Store) -> None:
    first = text_item("one")
    conversation = await new_conversation(store, first)
    more: list[Item] = [text_item("two"), text_item("three", role="assistant")]
    await store.add_items(conversation.conversation_id, more)
    assert await store.all_items(conversation.conversation_id) == [first, *more]


async def test_a_repeated_item_id_in_one_owner_is_invalid_and_adds_nothing(store: Store) -> None:
    first = text_item("one")
    conversation = await new_conversation(store, first)
    with pytest.raises(InvalidRequestError):
        await store.add_items(conversation.conversation_id, [text_item("new"), first])
    assert await store.all_items(conversation.conversation_id) == [first]


async def test_the_same_item_id_may_stand_under_two_owners(store: Store) -> None:
    shared = text_item("shared")
    one = await new_conversation(store, shared)
    two = await new_conversation(store, shared)
    assert await store.get_item(one.conversation_id, shared.id or "") == shared
    assert await store.get_item(two.conversation_id, shared.id or "") == shared


async def test_a_replacement_of_another_type_keeps_nothing_of_the_item_it_replaces(store: Store) -> None:
    call = McpCallItem(id="mcp_1", server_label="s", name="lookup", arguments='{"q": "secret"}', output="secret")
    conversation = await new_conversation(store, call)
    withheld = text_item("[withheld]").model_copy(update={"id": call.id})
    await store.replace_items(conversation.conversation_id, [withheld])
    assert await store.all_items(conversation.conversation_id) == [withheld]
    (record,) = await store.kernel.read([Get(ITEM, item_record_id(conversation.conversation_id, "mcp_1"))])
    assert record is not None and "secret" not in json.dumps(record.body)
    assert set(record.body) == set(withheld.model_dump(mode="json"))


async def test_items_beyond_one_write_are_added_in_order(store: Store) -> None:
    """More items than one write of any backend takes (a fork holder's copy of a long conversation)."""
    conversation = await new_conversation(store, text_item("first"))
    many = [text_item(f"m{n}") for n in range(MAX_BATCH + 1)]
    await store.add_items(conversation.conversation_id, many)
    stored = await store.all_items(conversation.conversation_id)
    assert [item.id for item in stored[1:]] == [item.id for item in many]


async def test_replace_items_changes_bodies_in_place_and_adds_nothing(store: Store) -> None:
    items = [text_item("one"), text_item("secret two"), text_item("three")]
    conversation = await new_conversation(store, *items)
    changed = items[1].model_copy(update={"content": [InputText(text="[REDACTED] two")]})
    await store.replace_items(conversation.conversation_id, [changed, text_item("never stored")])
    assert await store.all_items(conversation.conversation_id) == [items[0], changed, items[2]]


async def test_items_list_oldest_or_newest_first(store: Store) -> None:
    items = [text_item(f"m{n}") for n in range(4)]
    conversation = await new_conversation(store, *items)
    ascending = await store.list_items(conversation.conversation_id, None, 10, "asc")
    assert item_ids(ascending.items) == item_ids(items) and not ascending.has_more
    descending = await store.list_items(conversation.conversation_id, None, 10, "desc")
    assert item_ids(descending.items) == item_ids(items[::-1]) and not descending.has_more


async def test_item_pages_continue_after_a_cursor(store: Store) -> None:
    items = [text_item(f"m{n}") for n in range(4)]
    ids = item_ids(items)
    owner = (await new_conversation(store, *items)).conversation_id
    first = await store.list_items(owner, None, 2, "asc")
    assert item_ids(first.items) == ids[:2] and first.has_more
    middle = await store.list_items(owner, ids[0], 2, "asc")
    assert item_ids(middle.items) == ids[1:3] and middle.has_more
    last = await store.list_items(owner, ids[2], 2, "asc")
    assert item_ids(last.items) == ids[3:] and not last.has_more
    backwards = await store.list_items(owner, ids[3], 2, "desc")
    assert item_ids(backwards.items) == [ids[2], ids[1]] and backwards.has_more
    oldest = await store.list_items(owner, ids[1], 2, "desc")
    assert item_ids(oldest.items) == [ids[0]] and not oldest.has_more


async def test_item_cursor_is_read_in_its_own_owner(store: Store) -> None:
    shared, later = text_item("shared"), text_item("later")
    early_owner = await new_conversation(store, shared, later)
    before, after = text_item("before"), text_item("after")
    owner = await new_conversation(store, before, shared, after)
    assert item_ids((await store.list_items(owner.conversation_id, shared.id, 10, "asc")).items) == [after.id]
    assert item_ids((await store.list_items(owner.conversation_id, shared.id, 10, "desc")).items) == [before.id]
    assert item_ids((await store.list_items(early_owner.conversation_id, shared.id, 10, "asc")).items) == [later.id]


async def test_an_unknown_item_cursor_is_not_found(store: Store) -> None:
    elsewhere = text_item("elsewhere")
    await new_conversation(store, elsewhere)
    owner = (await new_conversation(store, text_item("mine"))).conversation_id
    with pytest.raises(NotFoundError):
        await store.list_items(owner, "msg_unknown", 10, "asc")
    with pytest.raises(NotFoundError):
        await store.list_items(owner, elsewhere.id, 10, "asc")


async def test_get_item_and_delete_item_act_on_one_owner(store: Store) -> None:
    shared, other = text_item("shared"), text_item("other")
    owner = (await new_conversation(store, shared, other)).conversation_id
    kept = (await new_conversation(store, shared)).conversation_id
    await store.delete_item(owner, shared.id or "")
    with pytest.raises(NotFoundError):
        await store.get_item(owner, shared.id or "")
    with pytest.raises(NotFoundError):
        await store.delete_item(owner, shared.id or "")
    assert await store.all_items(owner) == [other]
    assert await store.get_item(kept, shared.id or "") == shared


# ---- responses -----------------------------------------------------------------------


async def test_response_reads_back_as_saved(store: Store) -> None:
    conversation = await new_conversation(store)
    record, _ = await new_response(store, "q", conversation=conversation, background=True)
    assert await store.get_response(record.response.id) == record


async def test_a_response_starts_with_its_session_turn_items_and_owner(store: Store) -> None:
    start = response_start("hello")
    record, turn = start.record, start.turn

    await store.start_response(start, owner=ALICE)

    assert await store.get_response(record.response.id) == record
    assert await store.get_turn_record(record.session_id, turn.turn_id) == turn
    assert texts(await store.load_history(record.session_id, turn.turn_id)) == ["user:hello"]
    assert await store.all_items(record.response.id) == list(start.items)
    assert await store.session_queue(record.session_id) == [(turn.turn_id, "in_progress")]
    owners = [(await owners_of(store, kind, [key])).get(key) for kind, key in _started(start)]
    assert owners == [ALICE, ALICE, ALICE]


async def test_a_response_in_a_conversation_starts_in_its_session(store: Store) -> None:
    conversation = await new_conversation(store)
    start = response_start("q", conversation)
    start.turn.status = "queued"

    await store.start_response(start)

    assert (await store.get_response(start.record.response.id)).session_id == conversation.session_id
    assert await store.session_queue(conversation.session_id) == [(start.turn.turn_id, "queued")]


@pytest.mark.parametrize("refusal", ["item_repeated", "session_taken", "session_missing", "session_busy"])
async def test_a_refused_response_start_stores_nothing(store: Store, refusal: str) -> None:
    repeated = text_item("twice")
    if refusal == "item_repeated":
        start, error = response_start("q", items=[repeated, repeated]), InvalidRequestError
    elif refusal == "session_taken":
        start, error = response_start("q"), ConflictError
        assert start.session is not None
        await store.create_session(start.session)
    elif refusal == "session_missing":
        unstored = ConversationRecord(f"conv_{uuid.uuid4().hex}", new_id(), {}, int(time.time()))
        start, error = response_start("q", unstored), NotFoundError
    else:
        conversation = await new_conversation(store)
        await new_response(store, "running", conversation)
        start, error = response_start("q", conversation), ConflictError

    with pytest.raises(error):
        await store.start_response(start, owner=ALICE)

    with pytest.raises(NotFoundError):
        await store.get_response(start.record.response.id)
    with pytest.raises(NotFoundError):
        await store.get_turn_record(start.record.session_id, start.turn.turn_id)
    assert await store.all_items(start.record.response.id) == []
    assert [await owners_of(store, kind, [key]) for kind, key in _started(start)] == [{}, {}, {}]
    if refusal == "item_repeated":  # nor its new session
        with pytest.raises(NotFoundError):
            await store.start_turn(replace(start.turn, turn_id=new_id()), [])


def _started(start: ResponseStart) -> list[tuple[str, str]]:
    """The kind and id of each record a response's start stores (the session's owner is in its kernel record)."""
    return [("session", start.record.session_id), ("turn", start.turn.turn_id), ("response", start.record.response.id)]


async def test_unknown_response_is_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError):
        await store.get_response("resp_unknown")
    with pytest.raises(NotFoundError):
        await store.delete_response("resp_unknown")


async def test_finish_response_stores_its_events_for_replay(store: Store) -> None:
    record, _ = await new_response(store, "q")
    events = [event("response.created", 0), event("response.in_progress", 1), event("response.completed", 2)]
    done = finished(record, "a")
    await store.finish_response(done, events, [])
    assert await store.get_response(record.response.id) == done
    assert await store.events_after(record.response.id, -1) == [StoredEvent(i, data) for i, data in enumerate(events)]
    assert await store.events_after(record.response.id, 0) == [StoredEvent(1, events[1]), StoredEvent(2, events[2])]
    assert await store.events_after(record.response.id, 2) == []
    assert await store.events_after("resp_unknown", -1) == []
    # A cursor outside what any store numbers reads all (before them) or none (after them).
    assert len(await store.events_after(record.response.id, -(2**40))) == len(events)
    assert await store.events_after(record.response.id, 2**40) == []


async def test_finish_response_appends_its_items_to_the_conversation(store: Store) -> None:
    earlier = text_item("earlier")
    conversation = await new_conversation(store, earlier)
    record, _ = await new_response(store, "q", conversation=conversation)
    done = finished(record, "a")
    new_items = [*await store.all_items(record.response.id), *done.response.output]
    await store.finish_response(done, [event("response.completed", 0)], new_items)
    assert await store.all_items(conversation.conversation_id) == [earlier, *new_items]


async def test_as_many_items_as_a_request_carries_are_stored_in_one_write(store: Store) -> None:
    """A new conversation's, a response's input, and a finished response's new items in its conversation: each as
    many as a request may carry (and the records written with them), on every backend."""
    conversation = await new_conversation(store, *(text_item(f"c{n}") for n in range(MAX_MESSAGES)))
    inputs = [text_item(f"i{n}") for n in range(MAX_MESSAGES)]
    start = replace(response_start("q", conversation), items=inputs)
    await store.start_response(start)
    done = finished(start.record, "a")
    await store.finish_response(done, [event("response.completed", 0)], [*inputs, *done.response.output])
    assert await store.all_items(start.record.response.id) == inputs
    stored = await store.all_items(conversation.conversation_id)
    assert len(stored) == 2 * MAX_MESSAGES + len(done.response.output)
    assert stored[MAX_MESSAGES:] == [*inputs, *done.response.output]


async def test_finish_response_stores_nothing_when_an_item_is_rejected(store: Store) -> None:
    earlier = text_item("earlier")
    conversation = await new_conversation(store, earlier)
    record, _ = await new_response(store, "q", conversation=conversation)
    with pytest.raises(InvalidRequestError):
        await store.finish_response(finished(record, "a"), [event("response.completed", 0)], [earlier])
    assert await store.get_response(record.response.id) == record
    assert await store.events_after(record.response.id, -1) == []
    assert await store.all_items(conversation.conversation_id) == [earlier]


async def test_no_response_starts_in_a_conversation_deleted_after_it_was_read(store: Store) -> None:
    conversation = await new_conversation(store, text_item("earlier"))
    start = response_start("q", conversation)  # the service read the conversation, then it was deleted
    await store.delete_conversation(conversation.conversation_id)
    with pytest.raises(NotFoundError, match="conversation"):
        await store.start_response(start)
    with pytest.raises(NotFoundError):
        await store.get_response(start.record.response.id)
    assert await store.all_items(start.record.response.id) == []


async def test_a_response_ending_after_its_conversation_was_deleted_leaves_it_no_items(store: Store) -> None:
    conversation = await new_conversation(store, text_item("earlier"))
    record, _ = await new_response(store, "q", conversation=conversation)
    await store.delete_conversation(conversation.conversation_id)
    done = finished(record, "a")
    completed = event("response.completed", 0)
    await store.finish_response(done, [completed], list(done.response.output))
    assert (await store.get_response(record.response.id)).response.status == "completed"
    assert await store.events_after(record.response.id, -1) == [StoredEvent(0, completed)]  # its events stay
    assert await store.all_items(conversation.conversation_id) == []


async def test_a_conversation_deleted_while_a_response_runs_in_it_is_missing_to_the_next(store: Store) -> None:
    conversation = await new_conversation(store, text_item("earlier"))
    await new_response(store, "q", conversation=conversation)  # still running in the conversation's session
    start = response_start("next", conversation)  # the service read the conversation, then it was deleted
    await store.delete_conversation(conversation.conversation_id)
    with pytest.raises(NotFoundError, match=f"conversation '{conversation.conversation_id}' not found"):
        await store.start_response(start)


async def test_responses_list_in_creation_order_by_pages(store: Store) -> None:
    ids = [(await new_response(store, f"q{n}"))[0].response.id for n in range(3)]
    first = await listed_responses(store, None, 2, "asc")
    assert [r.response.id for r in first.items] == ids[:2] and first.has_more
    rest = await listed_responses(store, ids[1], 2, "asc")
    assert [r.response.id for r in rest.items] == ids[2:] and not rest.has_more
    newest = await listed_responses(store, None, 10, "desc")
    assert [r.response.id for r in newest.items] == ids[::-1] and not newest.has_more
    older = await listed_responses(store, ids[1], 10, "desc")
    assert [r.response.id for r in older.items] == ids[:1] and not older.has_more


async def test_responses_are_read_by_id_in_the_order_asked(store: Store) -> None:
    first, _ = await new_response(store, "a")
    second, _ = await new_response(store, "b")
    assert await store.responses_by_id([second.response.id, "resp_missing", first.response.id]) == [second, first]
    assert await store.responses_by_id([]) == []


async def test_the_items_of_several_owners_are_read_together_oldest_first(store: Store) -> None:
    kept = [text_item("c1"), text_item("c2")]
    conversation = await new_conversation(store, kept[0])
    first, _ = await new_response(store, "a")
    second, _ = await new_response(store, "b")
    await store.add_items(conversation.conversation_id, kept[1:])  # stored after the responses' items
    owners = [second.response.id, "resp_missing", conversation.conversation_id, first.response.id, first.response.id]
    found = await store.items_of(owners)
    assert found == {
        second.response.id: await store.all_items(second.response.id),
        conversation.conversation_id: kept,
        first.response.id: await store.all_items(first.response.id),
    }
    assert found[first.response.id] and found[first.response.id] != found[second.response.id]
    assert await store.items_of([]) == {}


async def test_a_response_is_deleted_with_its_record(store: Store) -> None:
    conversation = await new_conversation(store)
    own, _ = await new_response(store, "q")
    talked, _ = await new_response(store, "q", conversation=conversation)
    for record in (own, talked):
        assert await response_heads(store.kernel).find(record.response.id) is not None
        await store.delete_response(record.response.id)
        assert await response_heads(store.kernel).find(record.response.id) is None
    assert await stored_session(store, own.session_id) is None  # its own session went with it
    assert (await listed_responses(store, None, 10, "asc", conversation.conversation_id)).items == []


async def test_listed_responses_are_whole_records(store: Store) -> None:
    conversation = await new_conversation(store)
    record, _ = await new_response(store, "q", conversation=conversation, background=True)
    assert (await listed_responses(store, None, 10, "asc")).items == [record]


async def test_deleting_a_response_without_conversation_deletes_its_turn_and_session(store: Store) -> None:
    record, turn = await new_response(store, "q")
    kept, _ = await new_response(store, "other")
    await store.finish_response(finished(record, "a"), [event("response.completed", 0)], [])
    await store.delete_response(record.response.id)
    with pytest.raises(NotFoundError):
        await store.get_response(record.response.id)
    with pytest.raises(NotFoundError):
        await store.get_turn_record(record.session_id, turn.turn_id)
    assert await store.all_items(record.response.id) == []
    assert await store.events_after(record.response.id, -1) == []
    ghost = SessionRecord(record.session_id, None, "response", utcnow())
    with pytest.raises(NotFoundError):
        await store.start_turn(turn_of(ghost, "again"), [user("again")])
    assert [r.response.id for r in (await listed_responses(store, None, 10, "asc")).items] == [kept.response.id]
    with pytest.raises(NotFoundError):
        await store.delete_response(record.response.id)


async def test_deleting_a_response_in_a_conversation_keeps_the_conversation(store: Store) -> None:
    conversation = await new_conversation(store, text_item("earlier"))
    record, turn = await new_response(store, "q", conversation=conversation)
    done = finished(record, "a")
    await store.finish_response(done, [], list(done.response.output))
    items = await store.all_items(conversation.conversation_id)
    await store.delete_response(record.response.id)
    with pytest.raises(NotFoundError):
        await store.get_response(record.response.id)
    with pytest.raises(NotFoundError):
        await store.get_turn_record(record.session_id, turn.turn_id)
    assert await store.all_items(record.response.id) == []
    assert await conversations(store.kernel).get(conversation.conversation_id) == conversation
    assert await store.all_items(conversation.conversation_id) == items
    next_record, _ = await new_response(store, "next", conversation=conversation)
    assert (await store.get_response(next_record.response.id)).session_id == conversation.session_id


async def test_chain_history_follows_previous_response_ids_oldest_first(store: Store) -> None:
    chain: list[ResponseRecord] = []
    for name in ("a", "b", "c"):
        record, turn = await new_response(store, f"{name}?", previous=chain[-1] if chain else None)
        await complete(store, turn, f"{name}!")
        await store.finish_response(finished(record, f"{name}!"), [], [])
        chain.append(record)
    first, second, third = (r.response.id for r in chain)
    assert texts(await store.chain_history(third)) == [
        "user:a?",
        "assistant:a!",
        "user:b?",
        "assistant:b!",
        "user:c?",
        "assistant:c!",
    ]
    assert texts(await store.chain_history(second)) == ["user:a?", "assistant:a!", "user:b?", "assistant:b!"]
    assert texts(await store.chain_history(first)) == ["user:a?", "assistant:a!"]


async def test_fail_expired_turns_also_fails_their_responses(store: Store) -> None:
    running, _ = await new_response(store, "still running")
    done, turn = await new_response(store, "done")
    await store.finish_response(finished(done, "answer"), [], [])
    turn.status, turn.completed_at = "completed", utcnow()
    await store.finish_turn(turn)
    expired = await store.fail_expired_turns(lease(600), "the replica running it stopped")
    assert expired == [ExpiredTurn(running.turn_id, running.response.id)]
    failed = (await store.get_response(running.response.id)).response
    assert failed.status == "failed"
    assert failed.error is not None and failed.error.code == "interrupted"
    assert failed.error.message == "the replica running it stopped"
    assert (await store.get_response(done.response.id)).response.status == "completed"


async def test_a_response_failed_by_the_sweep_and_finished_after_reads_as_finished(store: Store) -> None:
    # Its run outlived its lease (a stalled replica): the answer it stores last replaces the sweep's failure.
    running, _ = await new_response(store, "slow")
    await store.fail_expired_turns(lease(600), "the replica running it stopped")
    assert (await store.get_response(running.response.id)).response.status == "failed"
    await store.finish_response(finished(running, "late answer"), [], [])
    late = (await store.get_response(running.response.id)).response
    assert (late.status, late.error) == ("completed", None)
    assert [record.response.id for record in (await listed_responses(store, None, 10, "asc")).items] == [
        running.response.id
    ]


async def test_turn_events_are_numbered_across_runs_and_replayed_after_a_number(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    turn = await start(store, session, "q")
    events = [turn_event(seq) for seq in range(5)]
    await store.save_turn_events(turn.turn_id, 0, events[:3])
    assert await store.turn_event_count(turn.turn_id) == 3
    await store.save_turn_events(turn.turn_id, 3, events[3:])
    assert await store.turn_events_after(turn.turn_id, -1) == [
        StoredEvent(seq, data) for seq, data in enumerate(events)
    ]
    assert await store.turn_events_after(turn.turn_id, 2) == [StoredEvent(3, events[3]), StoredEvent(4, events[4])]
    assert await store.turn_events_after(turn.turn_id, 4) == []
    await store.delete_session(agent.agent_id, session.session_id)
    assert await store.turn_event_count(turn.turn_id) == 0
    with pytest.raises(NotFoundError):
        await store.save_turn_events(turn.turn_id, 5, ["late, from a replica that had not heard of the delete"])


async def test_a_stored_turn_event_keeps_its_first_version(store: Store) -> None:
    agent = await new_agent(store)
    session = await new_session(store, agent.agent_id)
    turn = await start(store, session, "q")
    e0, e1_closing, e1_late, e2_late = (json.dumps({"version": name}) for name in ("e0", "e1", "e1-late", "e2"))
    await store.save_turn_events(turn.turn_id, 0, [e0, e1_closing])
    await store.save_turn_events(turn.turn_id, 1, [e1_late, e2_late])
    assert await store.turn_events_after(turn.turn_id, -1) == [
        StoredEvent(0, e0),
        StoredEvent(1, e1_closing),
        StoredEvent(2, e2_late),
    ]
