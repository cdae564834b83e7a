"""Forks (time travel) of sessions: a new session whose history is another's up to a turn, shared, not copied.

A fork is a new session, owned by its caller, and a lineage
(:mod:`ferryman.storage.domain.forks`) naming the session it shares with and the
last turn it shares. The shared turns stay where they are, under their ids and
their original session's id: the fork's listing, its turns and steps, and the
history its own turns read follow the lineage (:mod:`.fork_reads`), through a
fork of a fork too. Making one is O(1) in the turns it keeps.

Only ended turns are shared, since they never change. The last kept turn may
still be paused (``awaiting_input``): it is copied, as the fork's first own turn,
under a new id with its steps and messages, so that a resume or a decision in the
fork continues the fork's copy alone; a copy paused on calls held for approval has
them held in the approval inbox too, owned like the fork. An earlier kept turn
that is paused is refused (409): it may still change in its original.

The sessions are not on the storage kernel yet, so a fork's lineage and its session
are two writes: the lineage first, then the session. A lineage whose session is
missing is a fork being made for :data:`FORKING_SECONDS`, and after that one whose
session write failed: readers that list a source's forks then delete it.

**Deleting a session that forks share (copy-on-delete).** Its own turns that some
fork shares are copied first, in order and under new ids, into a holder: a hidden
session of no agent's (:data:`HELD_AGENT`), whose lineage is the deleted
session's (or names no source) and maps the old turn ids to the copies'; each
fork then shares the holder instead, and the original goes. A client reading the
forks sees those turns under their new ids from then on; a fork below that names
an old id reads its copy through the map, so no lineage below needs rewriting
and a delete cut short leaves every fork whole (the forks it did not repoint yet
still share the original, which it did not delete). A fork sharing only what the
deleted session shared in turn shares it from that session's source directly. A
holder is deleted once no fork shares it.

**Forking while the source is deleted.** The delete first marks the session
(:meth:`~ferryman.storage.domain.forks.Lineages.mark`, a record written with
compare-and-set: one delete at a time, a second is a 409), then lists its forks;
a fork writes its lineage, then reads the mark. On one store one of the two sees
the other's write: either the fork sees the mark and undoes itself (409), or
the delete sees its lineage (a fork being made counts) and repoints it to the
holder. After writing its session the fork reads its lineage again: gone (409),
or still naming the source, which must still exist (else 404, undone). A delete
that died leaves its mark until :data:`~ferryman.storage.domain.forks.MARK_SECONDS`
pass. The mark names the holder being made: when the delete fails, or the next
one takes over a dead one's mark, a holder no fork came to share is deleted.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from ferryman.api.agents import Step, ToolExecutionStep, Turn
from ferryman.api.content import Message
from ferryman.auth.filters import owner_of
from ferryman.auth.principal import Principal, acting_as, current_principal
from ferryman.errors import ConflictError, NotFoundError
from ferryman.ids import new_id, utcnow
from ferryman.storage.base import SessionRecord, StepWrite, Store, TurnRecord
from ferryman.storage.domain.forks import Lineage

from .approval_holds import ApprovalHolds
from .fork_reads import ForkReads
from .idempotency import Claim, CreatedRecord, forget_stored, settlement, stored_record
from .record_guard import RecordGuard
from .session_reads import SessionReads
from .webhooks import keep_webhook

_ENDED = frozenset({"completed", "failed", "awaiting_input"})
"""The statuses a kept turn may have: a turn that runs (or waits to run) has no history to keep yet."""

FORKING_SECONDS = 60.0
"""How long a lineage whose session is missing counts as a fork being made (its session comes next)."""

HELD_AGENT = "ferryman:fork-history"
"""The agent id of the holders of deleted sessions' shared turns: no agent's, so no listing shows them."""


class SessionForks:
    """Forks sessions, and keeps what forks share when their original is deleted.

    Args:
        store: The storage backend.
        guard: The access step on sessions and turns, and their owners.
        reads: Reads through the forks' lineages.
        lease_until: When a copied turn's lease ends (it runs, as far as the store knows, while it is written).
        sessions: The sessions' records, each read checked for its caller.
        holds: Where the calls a copied turn holds for approval are put (None: no approval inbox).
    """

    def __init__(
        self,
        store: Store,
        guard: RecordGuard,
        reads: ForkReads,
        lease_until: Callable[[], datetime],
        sessions: SessionReads,
        holds: ApprovalHolds | None = None,
    ) -> None:
        self._store = store
        self._guard = guard
        self._sessions = sessions
        self._reads = reads
        self._lineages = reads.lineages
        self._lease_until = lease_until
        self._holds = holds

    async def fork_session(
        self, agent_id: str, session_id: str, turn_id: str, session_name: str | None, key: Claim | None = None
    ) -> str:
        """A new session of the agent sharing the session's turns up to and including ``turn_id``, with ``key``
        (its request's idempotency key, claimed by the write that stores the session; forgotten first should the
        fork be undone); its id.

        Raises:
            IdempotencyKeyHeldError: an earlier call with the key holds it (the fork is undone).
            NotFoundError: the session, or the turn in it, does not exist (or the caller may not read it).
            ConflictError: a kept turn still runs or waits to run, one before the last is paused, or the
                paused last one changed while the session was read.
        """
        who = current_principal.get()
        source = await self._sessions.get(who, agent_id, session_id)
        own = await self._store.list_turns([session_id])
        turns = [*await self._reads.inherited_turns(session_id), *own]
        cut = next((i for i, turn in enumerate(turns) if turn.turn_id == turn_id), None)
        if cut is None:
            raise NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found")
        kept = turns[: cut + 1]
        for n, turn in enumerate(kept):
            if turn.status not in _ENDED:
                raise ConflictError(f"turn '{turn.turn_id}' is {turn.status}; fork the session once it has ended")
            if turn.status == "awaiting_input" and n < cut:
                raise ConflictError(f"turn '{turn.turn_id}' awaits input; fork the session once it has ended")
        paused = None
        if kept[-1].status == "awaiting_input":  # copied with its pending step: the caller must read the turn
            await self._guard.check(who, "read", "turn", kept[-1].turn_id)
            paused = await self._read(session_id, kept[-1])
        shared = kept[:-1] if paused is not None else kept
        target = SessionRecord(new_id(), agent_id, source.session_name if session_name is None else session_name,
                               utcnow())  # fmt: skip
        if shared:
            lineage = Lineage(id=target.session_id, of="session", source=session_id, through=shared[-1].turn_id,
                              agent_id=agent_id)  # fmt: skip
            await self._lineages.create(lineage, owner_of(who))
        try:
            if shared and await self._lineages.marked(session_id):
                raise ConflictError(f"session '{session_id}' is being deleted; fork it again if it remains")
            made = ("session", target.session_id)
            settle = settlement(key, CreatedRecord(*made))
            # A fork with a paused turn to copy takes its key once the copy is whole (a repeat meanwhile makes a
            # fork of its own, then finds the key held and undoes it); any other, with its session.
            owner = self._guard.creating(who, made)
            await self._store.create_session(target, owner=owner, settle=settle if paused is None else None)
            if paused is None:
                stored_record(key)
            self._guard.created(who, made)
            await self._still_shared(target.session_id if shared else None, agent_id, session_id)
            if paused is not None:
                copy = await self._copy_turn(paused, target.session_id, agent_id, who)
                await self._hold(paused, copy, agent_id)
                if settle is not None:
                    await self._store.write_keyed([], settle)
                    stored_record(key)
        except BaseException:
            await forget_stored(self._store, key)  # first: a repeat must not be told of a fork undone
            await self._discard(target)
            raise
        return target.session_id

    async def _still_shared(self, fork_id: str | None, agent_id: str, source_id: str) -> None:
        """After a fork's session was written: its lineage (if it shares) is still there, and its source too
        unless a delete of the source saw the lineage and gave the fork a holder instead (module's text).

        Raises:
            ConflictError: the lineage went meanwhile.
            NotFoundError: the source went meanwhile.
        """
        with acting_as(None):
            lineage = None if fork_id is None else await self._lineages.find(fork_id)
            if fork_id is not None and lineage is None:
                raise ConflictError(f"session '{source_id}' was deleted while it was forked")
            if lineage is None or lineage.source == source_id:
                await self._sessions.get(None, agent_id, source_id)

    async def _discard(self, target: SessionRecord) -> None:
        """Undo a fork that failed half-way (as the server: its session may not have been written)."""
        with acting_as(None):
            with contextlib.suppress(NotFoundError):
                await self._store.delete_session(target.agent_id or "", target.session_id)
            await self._lineages.delete(target.session_id)
            if self._holds is not None:
                await self._holds.forget(target.session_id)

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

    async def _read(self, session_id: str, turn: Turn) -> _Kept:
        """What is copied of a paused kept turn (its own: a paused turn is never shared), read after the listing.

        A turn read again with another status than the listing's (resumed meanwhile)
        changed while it was read: its steps, messages and record may each show a
        different moment, so the fork is refused rather than mixed.
        """
        messages = await self._store.turn_messages(session_id, [turn.turn_id])
        record = await self._store.get_turn_record(session_id, turn.turn_id)
        pending = await self._store.pending_step(turn.turn_id) if record.status == "awaiting_input" else None
        if record.status != turn.status or record.completed_at != turn.completed_at:
            raise ConflictError(f"turn '{turn.turn_id}' changed while session '{session_id}' was forked; try again")
        return _Kept(turn, record, messages.get(turn.turn_id, []), pending)

    async def _copy_turn(self, kept: _Kept, session_id: str, agent_id: str, who: Principal | None) -> TurnRecord:
        """Write one turn again under another session, owned by ``who`` (None: unowned): started with its
        messages, its steps, then its end; the copy's record."""
        original = kept.record
        copy = TurnRecord(
            turn_id=new_id(),
            session_id=session_id,
            agent_id=agent_id,
            status="in_progress",
            input_messages=list(original.input_messages),
            started_at=original.started_at,
            overrides=keep_webhook(original.overrides, None, ""),  # a copy is no run: nothing to post
            lease_until=self._lease_until(),
        )
        made = ("turn", copy.turn_id)
        await self._store.start_turn(copy, kept.messages, load_history=False, owner=self._guard.creating(who, made))
        self._guard.created(who, made)
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

    # ---- deleting --------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def detached(self, session_id: str) -> AsyncIterator[None]:
        """Around a session's delete: mark it, give what its forks share of it to a holder (module's text), let
        the delete run, lift the mark.

        Raises:
            ConflictError: another delete of the session is under way.
        """
        await self._drop_unused(await self._lineages.mark(session_id))
        try:
            await self._detach(session_id)
            yield
        finally:
            await self._drop_unused(await self._lineages.unmark(session_id))

    async def _drop_unused(self, holder: str) -> None:
        """Delete a holder a delete began and no fork came to share (the delete failed or died first)."""
        if not holder or await self._lineages.of_source(holder):
            return
        with acting_as(None), contextlib.suppress(NotFoundError):
            await self._store.delete_session(HELD_AGENT, holder)
        await self._lineages.delete(holder)

    async def _detach(self, session_id: str) -> None:
        with acting_as(None):
            forks = [lineage for lineage in await self._lineages.of_source(session_id) if await self._exists(lineage)]
            if not forks:
                return
            lineage = await self._lineages.find(session_id)
            own = await self._store.list_turns([session_id])
            own_ids = [turn.turn_id for turn in own]
            reach = max((own_ids.index(f.through) for f in forks if f.through in own_ids), default=-1)
            if reach < 0:  # they share only what it shares in turn: from its source, directly
                if lineage is not None:
                    for fork in forks:
                        await self._repoint(fork.id, lineage.source, {}, lineage.held)
                return
            holder = new_id()
            await self._lineages.note(session_id, holder)
            await self._store.create_session(SessionRecord(holder, HELD_AGENT, "fork history", utcnow()))
            moved: dict[str, str] = {}
            for turn in own[: reach + 1]:
                kept = await self._ended(session_id, turn)
                moved[turn.turn_id] = (await self._copy_turn(kept, holder, HELD_AGENT, None)).turn_id
            above = lineage or Lineage(id=holder, of="session", source="", through="")
            held = above.model_copy(update={"id": holder, "agent_id": HELD_AGENT, "renamed": moved})
            await self._lineages.create(held, None)
            for fork in forks:
                await self._repoint(fork.id, holder, moved, True)

    async def _ended(self, session_id: str, turn: Turn) -> _Kept:
        """What is copied of an ended turn."""
        messages = await self._store.turn_messages(session_id, [turn.turn_id])
        record = await self._store.get_turn_record(session_id, turn.turn_id)
        return _Kept(turn, record, messages.get(turn.turn_id, []), None)

    async def _repoint(self, fork_id: str, source: str, moved: dict[str, str], held: bool) -> None:
        def edit(lineage: Lineage) -> Lineage:
            through = moved.get(lineage.through, lineage.through)
            return lineage.model_copy(update={"source": source, "through": through, "held": held})

        await self._lineages.change(fork_id, edit)

    async def _exists(self, lineage: Lineage) -> bool:
        """Whether a lineage's session exists, or may yet (a fork being made); one whose session was never
        written is deleted."""
        if time.time() - lineage.created_at < FORKING_SECONDS:
            return True
        try:
            await self._sessions.get(None, lineage.agent_id or "", lineage.id)
        except NotFoundError:
            await self._lineages.delete(lineage.id)
            return False
        return True

    async def forget(self, session_id: str) -> None:
        """After a session was deleted: delete its lineage, and the holder it shared if no fork shares it now."""
        await forget_lineage(self._reads, session_id, self._drop_holder)

    async def _drop_holder(self, holder: str) -> None:
        with contextlib.suppress(NotFoundError):
            await self._store.delete_session(HELD_AGENT, holder)


@dataclass(frozen=True)
class _Kept:
    """One turn as read for its copy: its listing (with its steps), record, own messages, pending step."""

    turn: Turn
    record: TurnRecord
    messages: list[Message]
    pending: Step | None


def _step_of(step: Step, turn_id: str) -> Step:
    """A copy of a step for another turn, under a new id."""
    return step.model_copy(deep=True, update={"turn_id": turn_id, "step_id": new_id()})


async def forget_lineage(reads: ForkReads, fork_id: str, drop_holder: Callable[[str], Awaitable[None]]) -> None:
    """After a fork (a session or a conversation) was deleted: delete its lineage, then the holder it shared, and so
    on up, each once no fork shares it (``drop_holder`` deletes a holder's session or items)."""
    with acting_as(None):
        lineage = await reads.lineage(fork_id)
        if lineage is not None and await reads.lineages.delete(fork_id):
            await _release(reads, lineage, drop_holder)


async def _release(reads: ForkReads, lineage: Lineage, drop_holder: Callable[[str], Awaitable[None]]) -> None:
    if not lineage.held or await reads.lineages.of_source(lineage.source):
        return
    await drop_holder(lineage.source)
    above = await reads.lineages.find(lineage.source)
    if above is not None and await reads.lineages.delete(above.id):
        await _release(reads, above, drop_holder)
