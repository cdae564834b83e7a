"""Blocked text that earlier versions stored raw is withheld in place by the upgrade, on SQLite, PostgreSQL and Redis.

The data is what those versions wrote for a block: an Agents turn whose input a shield blocked
(followed by a clean turn that replayed it), one whose tool call's arguments a tool input shield
blocked, one paused on a client call beside such a blocked call (its output holds both), a
response whose input a guardrail blocked (in a conversation), and a turn whose shield only warned
(nothing to withhold). SQL databases are built at revision ``0008_shields`` (the schema on main
before this change) and filled with those rows; Redis data is written by the store and marked
layout 2. Opening the store upgrades it; what it reads back is what this version
stores for the same blocks.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import asyncpg
import pytest
from redis.asyncio import Redis
from replicas import redis_database
from storage_backends import CONNECT_TIMEOUT, POSTGRES_URL, postgres_store

from ferryman.api.agents import (
    Agent,
    AgentConfig,
    InferenceStep,
    SafetyViolation,
    ShieldCallStep,
    Step,
    ToolExecutionStep,
    Turn,
)
from ferryman.api.content import (
    CompletionMessage,
    Message,
    TextContentItem,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from ferryman.api.responses import InputText, Item, MessageItem, Refusal, Response
from ferryman.redis_url import split_prefix
from ferryman.storage import codec
from ferryman.storage.base import (
    ConversationRecord,
    ResponseRecord,
    ResponseStart,
    SessionRecord,
    StepWrite,
    Store,
    TurnRecord,
)
from ferryman.storage.domain.agents import agents
from ferryman.storage.redis.store import RedisStore
from ferryman.storage.redis.store_keys import SCHEMA, Keys
from ferryman.storage.sql.migrate import upgrade_postgres, upgrade_sqlite
from ferryman.storage.sql.postgres import PostgresStore
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.withheld import WITHHELD_ARGUMENTS, WITHHELD_TEXT, withheld_item

pytestmark = pytest.mark.anyio

MAIN = "0008_shields"
SECRET = "alice@example.com"
BLOCKED = f"mail {SECRET}"
WHEN = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
REFUSAL = CompletionMessage(content="The message was blocked: it contains email.", stop_reason="end_of_turn")
BLOCKING = SafetyViolation(
    violation_level="error", user_message=REFUSAL.content, metadata={"action": "block", "kinds": ["email"]}
)
WARNING = SafetyViolation(violation_level="warn", user_message="careful", metadata={"kinds": ["email"]})
CALL = ToolCall(
    call_id="c1", tool_name="echo", arguments={"text": BLOCKED}, arguments_json=json.dumps({"text": BLOCKED})
)
NOTE = "error: this call of 'echo' was not run: The message was blocked: it contains email."
CLEAN, FINE = UserMessage(content="second clean message"), CompletionMessage(content="fine", stop_reason="end_of_turn")
ITEM_IN = MessageItem(id="msg_in", role="user", content=[InputText(text=BLOCKED)], status="completed")
ITEM_OUT = MessageItem(id="msg_out", role="assistant", content=[Refusal(refusal=REFUSAL.content)], status="completed")
AGENT = Agent(agent_id="agent_old", agent_config=AgentConfig(model="m", instructions="x"), created_at=WHEN)


@dataclass
class OldTurn:
    """A turn as an earlier version stored it, with its steps, history messages and events."""

    turn_id: str
    session_id: str
    agent_id: str | None
    inputs: list[Any]
    messages: list[Message]
    steps: list[Step]
    output: CompletionMessage
    events: list[dict[str, Any]] = field(default_factory=list)
    status: Literal["completed", "awaiting_input"] = "completed"

    def record(self) -> TurnRecord:
        return TurnRecord(
            self.turn_id,
            self.session_id,
            self.agent_id,
            self.status,
            self.inputs,
            WHEN,
            output_message=self.output,
            infer_iters=1,
            completed_at=WHEN if self.status == "completed" else None,
        )


def _shield(turn_id: str, violation: SafetyViolation) -> ShieldCallStep:
    return ShieldCallStep(
        turn_id=turn_id, step_id=f"{turn_id}-shield", started_at=WHEN, completed_at=WHEN, violation=violation
    )


def _inference(turn_id: str, name: str, message: CompletionMessage) -> InferenceStep:
    step_id = f"{turn_id}-{name}"
    return InferenceStep(turn_id=turn_id, step_id=step_id, started_at=WHEN, completed_at=WHEN, model_response=message)


def _event(payload: dict[str, Any]) -> dict[str, Any]:
    return {"event": {"payload": payload}}


def _completed(turn: OldTurn, steps: list[Step]) -> dict[str, Any]:
    done = Turn(
        turn_id=turn.turn_id,
        session_id=turn.session_id,
        input_messages=turn.inputs,
        steps=steps,
        output_message=turn.output,
        started_at=WHEN,
        completed_at=WHEN,
        status="completed",
    )
    return _event({"event_type": "turn_complete", "turn": done.model_dump(mode="json")})


def old_turns() -> list[OldTurn]:
    blocked = OldTurn(
        "turn_in", "sess_a", AGENT.agent_id, [UserMessage(content=BLOCKED)], [UserMessage(content=BLOCKED)], [], REFUSAL
    )
    blocked.steps = [_shield("turn_in", BLOCKING)]
    blocked.events = [_event({"event_type": "turn_start", "turn_id": "turn_in"}), _completed(blocked, blocked.steps)]
    after = OldTurn("turn_next", "sess_a", AGENT.agent_id, [CLEAN], [CLEAN, FINE], [], FINE)
    after.steps = [_inference("turn_next", "answer", FINE)]
    calling = CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[CALL])
    answer = CompletionMessage(content="I could not", stop_reason="end_of_turn")
    ask = UserMessage(content="send it")
    tool = OldTurn(
        "turn_tool",
        "sess_t",
        AGENT.agent_id,
        [ask],
        [ask, calling, ToolResponseMessage(call_id="c1", content=NOTE), answer],
        [],
        answer,
    )
    blocked_call = ToolResponse(
        call_id="c1", tool_name="echo", content=NOTE, metadata={"error": True, "blocked_by_shield": "local"}
    )
    run = ToolExecutionStep(
        turn_id="turn_tool", step_id="turn_tool-tools", tool_calls=[CALL], tool_responses=[blocked_call]
    )
    tool.steps = [
        _inference("turn_tool", "call", calling),
        _shield("turn_tool", BLOCKING),
        run,
        _inference("turn_tool", "answer", answer),
    ]
    delta = {"event_type": "step_progress", "step_type": "inference", "step_id": "turn_tool-call"}
    tool.events = [
        _event(
            {
                **delta,
                "delta": {"type": "tool_call", "tool_call": '{"text": "mail alice', "parse_status": "in_progress"},
            }
        ),
        _event(
            {
                **delta,
                "delta": {"type": "tool_call", "tool_call": CALL.model_dump(mode="json"), "parse_status": "succeeded"},
            }
        ),
        _completed(tool, tool.steps),
    ]
    warned = OldTurn(
        "turn_warn",
        "sess_w",
        AGENT.agent_id,
        [UserMessage(content=BLOCKED)],
        [UserMessage(content=BLOCKED), FINE],
        [],
        FINE,
    )
    warned.steps = [_shield("turn_warn", WARNING), _inference("turn_warn", "answer", FINE)]
    warned.events = [_completed(warned, warned.steps)]
    guarded_input = UserMessage(content=[TextContentItem(text=BLOCKED)])
    response = OldTurn("turn_r", "sess_r", None, [guarded_input], [guarded_input], [], REFUSAL)
    response.steps = [_shield("turn_r", BLOCKING)]
    client_call = ToolCall(call_id="c2", tool_name="ask_user", arguments={}, arguments_json="{}")
    both = CompletionMessage(content="", stop_reason="end_of_message", tool_calls=[CALL, client_call])
    paused = OldTurn("turn_paused", "sess_p", AGENT.agent_id, [ask], [ask, both], [], both, status="awaiting_input")
    paused.steps = [
        _inference("turn_paused", "call", both),
        _shield("turn_paused", BLOCKING),
        ToolExecutionStep(
            turn_id="turn_paused",
            step_id="turn_paused-tools",
            tool_calls=[CALL, client_call],
            tool_responses=[blocked_call],
        ),
    ]
    return [blocked, after, tool, warned, response, paused]


RESPONSE = Response(id="resp_r", created_at=1, status="completed", model="m", output=[ITEM_OUT])


async def check(store: Store) -> None:
    """What the upgraded store reads back: placeholders where a shield blocked, the rest as it was."""
    [blocked, after] = await store.list_turns(["sess_a"])
    assert blocked.input_messages == [UserMessage(content=WITHHELD_TEXT)]
    assert SECRET not in blocked.model_dump_json()
    assert after.input_messages == [CLEAN]
    history = await store.load_history("sess_a", "turn_next")
    assert history == [UserMessage(content=WITHHELD_TEXT), REFUSAL, CLEAN, FINE]
    events = [json.loads(e.data) for e in await store.turn_events_after("turn_in", -1)]
    assert SECRET not in json.dumps(events)
    assert events[-1]["event"]["payload"]["turn"]["input_messages"][0]["content"] == WITHHELD_TEXT

    [tool] = await store.list_turns(["sess_t"])
    assert SECRET not in tool.model_dump_json()
    call_step, _, run, _ = tool.steps
    assert isinstance(call_step, InferenceStep) and isinstance(run, ToolExecutionStep)
    assert (
        call_step.model_response.tool_calls and call_step.model_response.tool_calls[0].arguments == WITHHELD_ARGUMENTS
    )
    assert run.tool_calls[0].arguments == WITHHELD_ARGUMENTS and run.tool_responses[0].content == NOTE
    tool_history = await store.load_history("sess_t", "turn_tool")
    assert SECRET not in json.dumps([m.model_dump(mode="json") for m in tool_history])
    assert len(tool_history) == 4  # no refusal joined: the input was not what was blocked
    assert SECRET not in json.dumps([e.data for e in await store.turn_events_after("turn_tool", -1)])

    paused = await store.get_turn_record("sess_p", "turn_paused")
    assert paused.output_message is not None and SECRET not in paused.output_message.model_dump_json()
    assert [call.arguments for call in paused.output_message.tool_calls or []] == [WITHHELD_ARGUMENTS, {}]

    [warned] = await store.list_turns(["sess_w"])
    assert warned.input_messages == [UserMessage(content=BLOCKED)]  # a warning blocks nothing

    assert (await store.list_items("resp_r", None, 10, "asc")).items == [withheld_item(ITEM_IN)]
    assert (await store.list_items("conv_r", None, 10, "asc")).items == [withheld_item(ITEM_IN), ITEM_OUT]
    assert await store.chain_history("resp_r") == [UserMessage(content=WITHHELD_TEXT), REFUSAL]


# ---- SQL: rows as the schema on main holds them ------------------------------------


def _q(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def _insert(table: str, **values: object) -> str:
    return f"INSERT INTO {table} ({', '.join(values)}) VALUES ({', '.join(_q(v) for v in values.values())})"  # noqa: S608


def sql_rows() -> list[str]:
    stamp = WHEN.isoformat()
    rows = [
        _insert("agents", agent_id=AGENT.agent_id, config=AGENT.agent_config.model_dump_json(), created_at=stamp),
        *(
            _insert("sessions", session_id=session, agent_id=agent, session_name="s", started_at=stamp)
            for session, agent in (
                ("sess_a", AGENT.agent_id),
                ("sess_t", AGENT.agent_id),
                ("sess_w", AGENT.agent_id),
                ("sess_p", AGENT.agent_id),
                ("sess_r", None),
            )
        ),
    ]
    for turn in old_turns():
        rows.append(
            _insert(
                "turns",
                turn_id=turn.turn_id,
                session_id=turn.session_id,
                agent_id=turn.agent_id,
                status=turn.status,
                input_messages=codec.dump_inputs(turn.inputs),
                output_message=turn.output.model_dump_json(),
                overrides="{}",
                infer_iters=1,
                started_at=stamp,
                completed_at=stamp if turn.status == "completed" else None,
            )
        )
        rows += [
            _insert("steps", step_id=s.step_id, turn_id=turn.turn_id, step_type=s.step_type, body=codec.dump_step(s))
            for s in turn.steps
        ]
        rows += [
            _insert(
                "messages", session_id=turn.session_id, turn_id=turn.turn_id, role=m.role, body=codec.dump_message(m)
            )
            for m in turn.messages
        ]
        rows += [
            _insert("turn_events", turn_id=turn.turn_id, seq=seq, body=json.dumps(data))
            for seq, data in enumerate(turn.events)
        ]
    rows += [
        _insert("conversations", conversation_id="conv_r", session_id="sess_r", metadata="{}", created_at=1),
        _insert(
            "responses",
            response_id="resp_r",
            turn_id="turn_r",
            session_id="sess_r",
            conversation_id="conv_r",
            status="completed",
            body=RESPONSE.model_dump_json(),
            created_at=1,
        ),
        _insert("items", item_id="msg_in", owner="resp_r", body=ITEM_IN.model_dump_json()),
        _insert("items", item_id="msg_in", owner="conv_r", body=ITEM_IN.model_dump_json()),
        _insert("items", item_id="msg_out", owner="conv_r", body=ITEM_OUT.model_dump_json()),
    ]
    return rows


async def test_sqlite_withholds_blocked_text_in_place(tmp_path: Path) -> None:
    path = str(tmp_path / "main.db")
    upgrade_sqlite(path, MAIN)
    with sqlite3.connect(path) as conn:
        for row in sql_rows():
            conn.execute(row)
    store = SqliteStore(path)
    await store.open()
    try:
        await check(store)
    finally:
        await store.close()


async def test_postgres_withholds_blocked_text_in_place(tmp_path: Path) -> None:
    async with postgres_store(tmp_path):  # skips (or, under CI, fails) when PostgreSQL is unreachable
        pass
    schema = f"blocked_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(POSTGRES_URL, timeout=CONNECT_TIMEOUT)
    try:
        await admin.execute(f'CREATE SCHEMA "{schema}"')
        await upgrade_postgres(POSTGRES_URL, schema, MAIN)
        await admin.execute(f'SET search_path TO "{schema}"')
        for row in sql_rows():
            await admin.execute(row)
        store = PostgresStore(POSTGRES_URL, schema=schema)
        await store.open()
        try:
            await check(store)
        finally:
            await store.close()
    finally:
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()


# ---- Redis: written by the store, marked layout 2 ----------------------------------


async def _write_old(store: Store) -> None:
    await agents(store.kernel).create(AGENT)
    for session, agent in (
        ("sess_a", AGENT.agent_id),
        ("sess_t", AGENT.agent_id),
        ("sess_w", AGENT.agent_id),
        ("sess_p", AGENT.agent_id),
        ("sess_r", None),
    ):
        await store.create_session(SessionRecord(session, agent, "s", WHEN))
    await store.create_conversation(ConversationRecord("conv_r", "sess_r", {}, 1), [])
    for turn in old_turns():
        running = turn.record()
        running.status, running.output_message, running.completed_at = "in_progress", None, None
        if turn.turn_id == "turn_r":  # a response's turn starts with it (its items: _write_old_items)
            record = ResponseRecord(RESPONSE, "turn_r", "sess_r", "conv_r")
            await store.start_response(ResponseStart(record, running, turn.messages, []))
        else:
            await store.start_turn(running, turn.messages, load_history=False)
        for step in turn.steps:
            await store.save_step(turn.turn_id, StepWrite(step), 1)
        await store.finish_turn(turn.record())
        await store.save_turn_events(turn.turn_id, 0, [json.dumps(data) for data in turn.events])
    await store.finish_response(ResponseRecord(RESPONSE, "turn_r", "sess_r", "conv_r"), [], [])


async def _write_old_items(admin: Redis, keys: Keys) -> None:
    """The response's input item and the conversation's items as layouts before 17 kept them (layout 17 moves
    them into the kernel)."""
    for owner, items in (("resp_r", [ITEM_IN]), ("conv_r", [ITEM_IN, ITEM_OUT])):
        await admin.zadd(keys.of("items", owner), {item.id or "": n for n, item in enumerate(items)})
        await admin.hset(keys.of("item_bodies", owner), mapping={i.id or "": i.model_dump_json() for i in items})


@pytest.fixture()
async def redis_deployment() -> AsyncIterator[tuple[str, str, Redis]]:
    with redis_database() as prefixed:
        url, prefix = split_prefix(prefixed)
        admin = Redis.from_url(url, decode_responses=True)
        try:
            yield url, prefix, admin
        finally:
            await admin.aclose()


async def _reopened(url: str, prefix: str, then: Callable[[Store], Awaitable[None]]) -> None:
    store = RedisStore(url, prefix)
    await store.open()
    try:
        await then(store)
    finally:
        await store.close()


async def test_redis_withholds_blocked_text_in_place_once(redis_deployment: tuple[str, str, Redis]) -> None:
    url, prefix, admin = redis_deployment
    await _reopened(url, prefix, _write_old)
    await _write_old_items(admin, Keys(prefix))
    await admin.set(Keys(prefix).global_(SCHEMA), 2)
    await _reopened(url, prefix, check)
    # A conversion that died midway runs again from the start: nothing is withheld twice, no refusal joined twice.
    await admin.set(Keys(prefix).global_(SCHEMA), 2)
    await _reopened(url, prefix, check)


def test_items_withheld_by_the_upgrade_are_the_engines() -> None:
    """The upgrade's JSON rewrite of an item gives what the engine keeps of it now, for every replayed kind."""
    from ferryman.api.responses import FunctionCallItem, FunctionCallOutputItem, McpCallItem
    from ferryman.storage.blocked_text import withheld_item as withheld_body

    items: list[Item] = [
        ITEM_IN,
        MessageItem(id="a", role="assistant", content=[Refusal(refusal="no")]),
        FunctionCallItem(id="f", call_id="c", name="n", arguments=json.dumps({"text": BLOCKED})),
        FunctionCallOutputItem(id="o", call_id="c", output=BLOCKED),
        McpCallItem(id="m", server_label="s", name="n", arguments="{}", output=BLOCKED),
    ]
    for item in items:
        assert json.loads(withheld_body(item.model_dump_json())) == json.loads(withheld_item(item).model_dump_json())
