"""Records of turns, responses and conversations as the services build them, for the storage tests.

Each builder makes what a service would pass to the store (a session, a turn with its lease, a step, a
response's start, an item), with fresh ids, so a test states only what it is about.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from ferryman.api.agents import (
    Agent,
    AgentConfig,
    InferenceStep,
    TokenUsage,
    ToolExecutionStep,
)
from ferryman.api.content import (
    CompletionMessage,
    Message,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    content_to_text,
)
from ferryman.api.responses import (
    ConversationRef,
    InputText,
    Item,
    MessageItem,
    OutputText,
    Response,
    Usage,
)
from ferryman.ids import new_id, utcnow
from ferryman.storage.base import (
    ConversationRecord,
    ResponseRecord,
    ResponseStart,
    SessionRecord,
    StepWrite,
    Store,
    TurnRecord,
)
from ferryman.storage.domain.agents import agents, sessions
from ferryman.storage.kernel.model import PageOf


def user(text: str) -> UserMessage:
    return UserMessage(content=text)


def said(text: str, *calls: ToolCall) -> CompletionMessage:
    return CompletionMessage(content=text, stop_reason="end_of_turn", tool_calls=list(calls))


def texts(messages: list[Message]) -> list[str]:
    """``role:text`` of each message, for readable history assertions."""
    return [f"{m.role}:{content_to_text(m.content)}" for m in messages]


async def new_agent(store: Store, name: str = "agent") -> Agent:
    """An agent, a record of the store's kernel (its own behaviour is ``test_agent_records.py``'s)."""
    config = AgentConfig(model="m", instructions="be brief", name=name, toolgroups=["builtin::calculator"])
    agent = Agent(agent_id=new_id(), agent_config=config, created_at=utcnow())
    await agents(store.kernel).create(agent)
    return agent


async def new_session(store: Store, agent_id: str | None, name: str = "session") -> SessionRecord:
    session = SessionRecord(new_id(), agent_id, name, utcnow())
    await store.create_session(session)
    return session


async def stored_session(store: Store, session_id: str) -> SessionRecord | None:
    """A session's record, as the services read it (None: missing)."""
    found = await sessions(store.kernel).find(session_id)
    return None if found is None else found.value


async def sessions_of(
    store: Store, agent_id: str, start_index: int = 0, limit: int | None = None
) -> PageOf[SessionRecord]:
    """A page of an agent's sessions' records in creation order, as the services list them."""
    return await sessions(store.kernel).page(parent=None, where=("agent_id", agent_id), offset=start_index, limit=limit)


def lease(seconds: float = 60.0) -> datetime:
    """The end of a lease that far from now (negative: already over)."""
    return utcnow() + timedelta(seconds=seconds)


def turn_of(session: SessionRecord, text: str) -> TurnRecord:
    return TurnRecord(
        turn_id=new_id(),
        session_id=session.session_id,
        agent_id=session.agent_id,
        status="in_progress",
        input_messages=[user(text)],
        started_at=utcnow(),
        lease_until=lease(),
    )


async def start(store: Store, session: SessionRecord, text: str) -> TurnRecord:
    """A running turn whose only history message is the user's ``text``."""
    record = turn_of(session, text)
    await store.start_turn(record, [user(text)])
    return record


def inference(turn_id: str, message: CompletionMessage) -> InferenceStep:
    return InferenceStep(
        turn_id=turn_id,
        step_id=new_id(),
        started_at=utcnow(),
        completed_at=utcnow(),
        model_response=message,
        usage=TokenUsage(input_tokens=7, output_tokens=3),
    )


def answer(record: TurnRecord, text: str) -> StepWrite:
    """The inference step that answers ``text``, with the assistant message it adds to the history."""
    step = inference(record.turn_id, said(text))
    return StepWrite(step, messages=[step.model_response])


async def complete(store: Store, record: TurnRecord, text: str) -> InferenceStep:
    """Finish a turn with a last inference step answering ``text``."""
    write = answer(record, text)
    record.status, record.output_message, record.completed_at = "completed", said(text), utcnow()
    record.infer_iters += 1
    await store.finish_turn(record, write)
    assert isinstance(write.step, InferenceStep)
    return write.step


async def pause(store: Store, record: TurnRecord, text: str) -> ToolExecutionStep:
    """The model calls a client tool (saying ``text``); the turn waits on a pending tool step."""
    call = ToolCall(call_id=new_id("call"), tool_name="get_weather", arguments={"city": "Paris"})
    asked = inference(record.turn_id, said(text, call))
    record.infer_iters += 1
    await store.save_step(record.turn_id, StepWrite(asked, messages=[asked.model_response]), record.infer_iters)
    waiting = ToolExecutionStep(
        turn_id=record.turn_id, step_id=new_id(), started_at=utcnow(), tool_calls=[call], tool_responses=[]
    )
    await store.save_step(record.turn_id, StepWrite(waiting, pending=True), record.infer_iters)
    record.status = "awaiting_input"
    await store.finish_turn(record)
    return waiting


def answered(waiting: ToolExecutionStep, output: str) -> StepWrite:
    """The pending tool step completed with the client's ``output``, with its tool message."""
    call = waiting.tool_calls[0]
    response = ToolResponse(call_id=call.call_id, tool_name=call.tool_name, content=output)
    done = waiting.model_copy(update={"tool_responses": [response], "completed_at": utcnow()})
    return StepWrite(done, messages=[ToolResponseMessage(call_id=call.call_id, content=output)])


def text_item(text: str, role: str = "user") -> MessageItem:
    if role == "assistant":
        return MessageItem(id=new_id("msg"), role="assistant", content=[OutputText(text=text)], status="completed")
    return MessageItem(id=new_id("msg"), role="user", content=[InputText(text=text)], status="completed")


def item_ids(items: Sequence[Item]) -> list[str | None]:
    return [item.id for item in items]


async def new_conversation(store: Store, *items: Item, metadata: dict[str, str] | None = None) -> ConversationRecord:
    session = await new_session(store, None, "conversation")
    record = ConversationRecord(f"conv_{uuid.uuid4().hex}", session.session_id, metadata or {}, int(time.time()))
    await store.create_conversation(record, list(items))
    return record


async def new_response(
    store: Store,
    text: str,
    conversation: ConversationRecord | None = None,
    previous: ResponseRecord | None = None,
    background: bool = False,
) -> tuple[ResponseRecord, TurnRecord]:
    """A running response (as the responses service starts one): its session, turn, record and input item."""
    start = response_start(text, conversation, previous, background)
    await store.start_response(start)
    return start.record, start.turn


def response_start(
    text: str,
    conversation: ConversationRecord | None = None,
    previous: ResponseRecord | None = None,
    background: bool = False,
    items: Sequence[Item] | None = None,
) -> ResponseStart:
    """What starts a response (outside a conversation: in a session of its own), its input item ``text``."""
    if conversation is None:
        session = SessionRecord(new_id(), None, "response", utcnow())
    else:
        session = SessionRecord(conversation.session_id, None, "conversation", utcnow())
    turn = turn_of(session, text)
    previous_id = previous.response.id if previous else None
    conversation_id = conversation.conversation_id if conversation else None
    response = Response(
        id=f"resp_{uuid.uuid4().hex}",
        created_at=int(time.time()),
        status="in_progress",
        model="m",
        previous_response_id=previous_id,
        conversation=ConversationRef(id=conversation_id) if conversation_id else None,
        background=background,
        metadata={"test": "contract"},
    )
    record = ResponseRecord(response, turn.turn_id, turn.session_id, conversation_id, previous_id, background)
    inputs = [text_item(text)] if items is None else items
    return ResponseStart(record, turn, [user(text)], inputs, None if conversation else session)


def finished(record: ResponseRecord, text: str) -> ResponseRecord:
    """The record of a response completed with the answer ``text``."""
    response = record.response.model_copy(
        update={
            "status": "completed",
            "output": [text_item(text, role="assistant")],
            "usage": Usage(input_tokens=5, output_tokens=2, total_tokens=7),
        }
    )
    return ResponseRecord(
        response,
        record.turn_id,
        record.session_id,
        record.conversation_id,
        record.previous_response_id,
        record.background,
    )


def event(kind: str, seq: int) -> str:
    """A response event's JSON data, as the façade stores it (no SSE framing)."""
    return json.dumps({"type": kind, "sequence_number": seq})


def turn_event(seq: int) -> str:
    """A turn event's JSON data."""
    return json.dumps({"event": {"payload": {"event_type": "step_progress", "n": seq}}})
