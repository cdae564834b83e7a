"""Forks (time travel): a new session, or conversation, whose history is another's up to a point.

A fork copies what it keeps through the store's own operations, so that it is
owned by its caller and checked like any other write, and shares no mutable
state with its original: a copied turn gets a new id, each of its steps a new
id, and its history messages are written again under the copy. What both hold
afterwards are immutable values only (message texts, tool call ids, an item's
id within its conversation). A turn's stream events are not copied: a copied
turn is read through its steps, and its events stay the original's.

A kept turn paused on calls held for approval stays paused in the fork, and its
copy's calls are held in the approval inbox too, owned like the fork: a decision
there continues the fork's turn, the original's calls stay the original's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ferryman.api.agents import Step, ToolExecutionStep, Turn
from ferryman.api.content import Message
from ferryman.api.responses import Item
from ferryman.errors import ConflictError, InvalidRequestError, NotFoundError
from ferryman.ids import new_id, utcnow
from ferryman.storage.base import ConversationRecord, SessionRecord, StepWrite, Store, TurnRecord

from .approval_holds import ApprovalHolds
from .webhooks import keep_webhook

_ENDED = frozenset({"completed", "failed", "awaiting_input"})
"""The statuses a kept turn may have: a turn that runs (or waits to run) has no history to copy yet."""

MAX_FORK_TURNS = 1000
"""The most turns one fork copies by default (``storage.max_fork_turns``)."""


class SessionForks:
    """Copies a session's turns into a new session owned by the caller.

    Args:
        store: The storage backend (the owner-checking one: the caller must be able to read the original).
        lease_until: When a copied turn's lease ends (it runs, as far as the store knows, while it is written).
        max_turns: The most turns one fork copies (``storage.max_fork_turns``).
        holds: Where the calls a copied turn holds for approval are put (None: no approval inbox).
    """

    def __init__(
        self,
        store: Store,
        lease_until: Callable[[], datetime],
        max_turns: int = MAX_FORK_TURNS,
        holds: ApprovalHolds | None = None,
    ) -> None:
        self._store = store
        self._lease_until = lease_until
        self._max_turns = max_turns
        self._holds = holds

    async def fork_session(self, agent_id: str, session_id: str, turn_id: str, session_name: str | None) -> str:
        """A new session of the agent holding the session's turns up to and including ``turn_id``; its id.

        Raises:
            NotFoundError: the session, or the turn in it, does not exist (or the caller may not read it).
            InvalidRequestError: the fork would copy more than ``storage.max_fork_turns`` turns.
            ConflictError: a kept turn still runs or waits to run, or one changed while the session was read.
        """
        source = await self._store.get_session(agent_id, session_id)
        turns = await self._store.list_turns([session_id])
        cut = next((i for i, turn in enumerate(turns) if turn.turn_id == turn_id), None)
        if cut is None:
            raise NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found")
        kept = turns[: cut + 1]
        if len(kept) > self._max_turns:
            raise InvalidRequestError(
                f"a fork at turn '{turn_id}' would copy {len(kept)} turns, more than storage.max_fork_turns "
                f"({self._max_turns}); fork at an earlier turn"
            )
        for turn in kept:
            if turn.status not in _ENDED:
                raise ConflictError(f"turn '{turn.turn_id}' is {turn.status}; fork the session once it has ended")
        copies = await self._read(session_id, kept)
        target = SessionRecord(new_id(), agent_id, source.session_name if session_name is None else session_name,
                               utcnow())  # fmt: skip
        await self._store.create_session(target)
        try:
            for copy in copies:
                await self._hold(copy, await self._copy_turn(copy, target), agent_id)
        except BaseException:
            await self._store.delete_session(agent_id, target.session_id)
            if self._holds is not None:
                await self._holds.forget(target.session_id)
            raise
        return target.session_id

    async def _hold(self, kept: _Kept, copy: TurnRecord, agent_id: str) -> None:
        """Put the calls the copy of a turn paused for approval holds in the inbox, as the run that paused did."""
        pending = kept.pending
        if self._holds is None or not isinstance(pending, ToolExecutionStep) or not pending.approval_requests:
            return
        paused = kept.turn.model_copy(
            update={
                "turn_id": copy.turn_id,
                "session_id": copy.session_id,
                "approval_requests": pending.approval_requests,
            }
        )
        await self._holds.hold_turn(paused, agent_id)

    async def _read(self, session_id: str, kept: list[Turn]) -> list[_Kept]:
        """What is copied of each kept turn, read after the turns were listed.

        A kept turn read again with another status than the listing's (a paused one
        resumed meanwhile) changed while it was read: its steps, messages and record
        may each show a different moment, so the fork is refused rather than mixed.
        """
        messages = await self._store.turn_messages(session_id, [turn.turn_id for turn in kept])
        copies: list[_Kept] = []
        for turn in kept:
            record = await self._store.get_turn_record(session_id, turn.turn_id)
            pending = await self._store.pending_step(turn.turn_id) if record.status == "awaiting_input" else None
            if record.status != turn.status or record.completed_at != turn.completed_at:
                raise ConflictError(f"turn '{turn.turn_id}' changed while session '{session_id}' was forked; try again")
            copies.append(_Kept(turn, record, messages.get(turn.turn_id, []), pending))
        return copies

    async def _copy_turn(self, kept: _Kept, target: SessionRecord) -> TurnRecord:
        """Write one turn again under the target session: started with its messages, its steps, then its end;
        the copy's record."""
        original = kept.record
        copy = TurnRecord(
            turn_id=new_id(),
            session_id=target.session_id,
            agent_id=target.agent_id,
            status="in_progress",
            input_messages=list(original.input_messages),
            started_at=original.started_at,
            overrides=keep_webhook(original.overrides, None, ""),  # a copy is no run: nothing to post
            lease_until=self._lease_until(),
        )
        await self._store.start_turn(copy, kept.messages, load_history=False)
        for step in kept.turn.steps:
            await self._store.save_step(copy.turn_id, StepWrite(_step_of(step, copy.turn_id)), original.infer_iters)
        if kept.pending is not None:
            write = StepWrite(_step_of(kept.pending, copy.turn_id), pending=True)
            await self._store.save_step(copy.turn_id, write, original.infer_iters)
        copy.status = original.status
        copy.output_message = original.output_message
        copy.infer_iters = original.infer_iters
        copy.error = original.error
        copy.completed_at = original.completed_at
        await self._store.finish_turn(copy)
        return copy


@dataclass(frozen=True)
class _Kept:
    """One kept turn as read for its copy: its listing (with its steps), record, own messages, pending step."""

    turn: Turn
    record: TurnRecord
    messages: list[Message]
    pending: Step | None


async def fork_conversation(
    store: Store, conversation_id: str, item_id: str, metadata: dict[str, str] | None
) -> ConversationRecord:
    """A new conversation holding the conversation's items up to and including ``item_id``.

    The items keep their ids (an id is unique within its conversation), so a client that
    sends one back to the fork finds it there, as in the original.

    Raises:
        NotFoundError: the conversation, or the item in it, does not exist (or the caller may not read it).
    """
    source = await store.get_conversation(conversation_id)
    items = await store.all_items(conversation_id)
    cut = next((i for i, item in enumerate(items) if item.id == item_id), None)
    if cut is None:
        raise NotFoundError(f"item '{item_id}' not found in conversation '{conversation_id}'")
    kept: list[Item] = [item.model_copy(deep=True) for item in items[: cut + 1]]
    session = SessionRecord(new_id(), None, "conversation", utcnow())
    await store.create_session(session)
    record = ConversationRecord(
        conversation_id=f"conv_{uuid.uuid4().hex}",
        session_id=session.session_id,
        metadata=dict(source.metadata if metadata is None else metadata),
        created_at=int(time.time()),
    )
    await store.create_conversation(record, kept)
    return record


def _step_of(step: Step, turn_id: str) -> Step:
    """A copy of a step for another turn, under a new id."""
    return step.model_copy(deep=True, update={"turn_id": turn_id, "step_id": new_id()})
