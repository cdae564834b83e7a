"""Turns, steps, the history they build, turn events and leases, in Redis.

One running turn per session holds across replicas: the session hash names its
running turn, and only the scripts that start or resume a turn set it, after
checking it is free, atomically. Running turns (and only they) also sit in the
``leases`` sorted set scored by lease end, so expired ones are a range query
away and a lease is renewed only while its turn is in the set.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

from ferryman.api.agents import Step, Turn, TurnStatus
from ferryman.api.content import Message, TurnInputMessage
from ferryman.errors import FailureCode, NotFoundError
from ferryman.storage import codec
from ferryman.storage.base import (
    ExpiredTurn,
    KeySettlement,
    ReadAlong,
    Resumed,
    ResumePoint,
    StepWrite,
    StoredEvent,
    TurnRecord,
    turn_from_record,
)
from ferryman.storage.domain.kinds import RESPONSE
from ferryman.storage.history_cache import HistoryRow, Kept
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.owners import load_owner
from ferryman.storage.redis.idempotency import settlement_args
from ferryman.storage.redis.kernel import RedisKernel
from ferryman.storage.redis.lua_turns import (
    CLAIM_RESUME,
    DELETE_TURN,
    FAIL_EXPIRED,
    FINISH_TURN,
    LOAD_HISTORY,
    REDACT_TURN_INPUT,
    SAVE_STEP,
    SAVE_TURN_EVENTS,
    START_TURN,
    ClaimResume,
    DeleteTurn,
    FailExpired,
    HistoryOf,
    RedactTurnInput,
    SaveTurnEvents,
    StartTurn,
)
from ferryman.storage.redis.records import finish_args, lease_score, save_step_args, turn_of, turn_start_args
from ferryman.storage.redis.script import run_together
from ferryman.storage.redis.scripts import RedisBase
from ferryman.storage.redis.store_keys import (
    LEASES,
    MESSAGES,
    PENDING,
    SESSION,
    SESSION_QUEUED,
    SESSION_TURNS,
    STEP_BODIES,
    STEPS,
    TURN,
    TURN_EVENTS,
    message_row,
    stored_event,
)


def _completed(step_ids: list[str], pending: list[str], bodies: dict[str, str]) -> list[Step]:
    """A turn's completed steps, in order: its steps (``step_ids``) less those it waits on."""
    waiting = set(pending)
    return [codec.load_step(bodies[step_id]) for step_id in step_ids if step_id not in waiting]


class RedisTurns(RedisBase):
    """Turns, steps and history messages over the backend's scripts and pipelines."""

    kernel: RedisKernel

    def _history(self, session_id: str, kept: Kept, reply: list[Any]) -> list[Message]:
        """The history a script's ``history`` answered, extending ``kept`` when it read under the same epoch."""
        epoch, own_order = int(reply[0]), reply[2]
        if epoch == -1:  # no such session (deleted)
            return self._histories.gone(session_id)
        if kept.epoch != epoch:  # the script read them all (``after`` 0)
            kept = Kept(epoch)
        rows: list[HistoryRow] = []
        at = 3
        while (order := int(float(reply[at]))) != 0:
            count = int(reply[at + 1])
            rows += [(order, True, False, *message_row(entry)) for entry in reply[at + 2 : at + 2 + count]]
            at += 2 + count
        before = int(own_order) if own_order != "" else None
        rows += [(before or 0, False, True, *message_row(entry)) for entry in reply[at + 1 :]]
        return self._histories.loaded(session_id, kept, before, rows)

    async def start_turn(
        self,
        record: TurnRecord,
        history: list[Message],
        load_history: bool = True,
        owner: Owner | None = None,
        settle: KeySettlement | None = None,
        along: ReadAlong | None = None,
    ) -> list[Message]:
        """Store a new running turn, its input messages, its owner and its request's idempotency key outcome;
        return the history it continues (and ``along``'s reads, sent in the same trip).

        Raises:
            NotFoundError: the session does not exist (for this agent).
            ConflictError: another turn of the session is running.
        """
        kept = self._histories.kept.kept(record.session_id)
        start = StartTurn(
            **turn_start_args(record, history, owner),
            with_history=load_history,
            epoch=kept.epoch,
            after=kept.after,
            **settlement_args(settle),
        )
        if along is None or not along.ops:
            reply = await self._run(START_TURN, start)
        else:
            reads = self.kernel.read_call(along.ops)
            reply, found = await run_together(self._db, self._call(START_TURN, start), reads)
            along.written = True
            along.results = self.kernel.read_results(along.ops, found())
        return self._history(record.session_id, kept, reply) if load_history else []

    async def claim_resume(
        self,
        session_id: str,
        turn_id: str,
        lease_until: datetime,
        expected: TurnStatus = "awaiting_input",
        overrides: dict[str, Any] | None = None,
        settle: KeySettlement | None = None,
        load_history: bool = False,
        along: ReadAlong | None = None,
        pending: str | None = None,
    ) -> Resumed:
        """Move an awaiting (or ``expected``) turn to running, under a lease until ``lease_until`` (with new
        ``overrides``, if given, only while it waits on step ``pending``, if given, and its request's idempotency
        key outcome); return it (and its history, and ``along``'s reads, when asked, sent in the same trip).

        Raises:
            NotFoundError: no such turn in this session.
            ConflictError: the turn is not ``expected``, no longer waits on ``pending``, or another turn of the
                session runs.
        """
        kept = self._histories.kept.kept(session_id)
        claim = ClaimResume(
            session_id=session_id,
            turn_id=turn_id,
            lease=lease_score(lease_until),
            expected=expected,
            overrides="" if overrides is None else json.dumps(overrides),
            with_history=load_history,
            epoch=kept.epoch,
            after=kept.after,
            pending=pending or "",
            **settlement_args(settle),
        )
        if along is None or not along.ops:
            reply = await self._run(CLAIM_RESUME, claim)
        else:
            reads = self.kernel.read_call(along.ops)
            reply, found = await run_together(self._db, self._call(CLAIM_RESUME, claim), reads)
            along.written = True
            along.results = self.kernel.read_results(along.ops, found())
        fields, history = reply
        record = turn_of(turn_id, fields)
        record.lease_until = lease_until
        return Resumed(record, self._history(session_id, kept, history[1:]) if load_history else [])

    async def resume_point(self, agent_id: str, session_id: str, turn_id: str) -> ResumePoint:
        """Read a turn of the agent's session with its steps and its events' count, in one transaction."""
        async with self._db.pipeline(transaction=True) as pipe:
            pipe.hget(self._keys.of(SESSION, session_id), "agent_id")
            pipe.hgetall(self._keys.of(TURN, turn_id))
            pipe.zrange(self._keys.of(STEPS, turn_id), 0, -1)
            pipe.zrange(self._keys.of(PENDING, turn_id), 0, -1)
            pipe.hgetall(self._keys.of(STEP_BODIES, turn_id))
            pipe.zcard(self._keys.of(TURN_EVENTS, turn_id))
            owner, fields, step_ids, pending, bodies, events = await pipe.execute()
        if owner != agent_id:
            raise NotFoundError(f"session '{session_id}' of agent '{agent_id}' not found")
        if fields.get("session_id") != session_id:
            raise NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found")
        done = _completed(step_ids, pending, bodies)
        latest = pending[-1] if pending else None
        paused = codec.load_step(bodies[latest]) if latest is not None and latest in bodies else None
        return ResumePoint(turn_of(turn_id, fields), done, paused, int(events))

    async def save_step(self, turn_id: str, write: StepWrite, infer_iters: int) -> None:
        """Store or replace a step, its messages and the inference count, atomically."""
        await self._run(SAVE_STEP, save_step_args(turn_id, write, infer_iters))

    async def redact_turn_input(self, turn_id: str, inputs: list[TurnInputMessage], messages: list[Message]) -> None:
        """Replace a running turn's input messages and its own history messages, atomically.

        Raises:
            NotFoundError: the turn no longer exists.
            ConflictError: the turn no longer runs.
        """
        redact = RedactTurnInput(
            turn_id=turn_id, inputs=codec.dump_inputs(inputs), messages=[codec.dump_message(m) for m in messages]
        )
        await self._run(REDACT_TURN_INPUT, redact)

    async def finish_turn(
        self, record: TurnRecord, last: StepWrite | None = None, overrides: dict[str, Any] | None = None
    ) -> None:
        """Store a turn's final or awaiting state with its last step (and new ``overrides``, if given); a turn that
        left running frees its session.

        A turn deleted meanwhile (its response or session was) stays deleted.
        """
        finish = finish_args(record, last)
        if overrides is not None:
            finish = replace(finish, overrides=json.dumps(overrides))
        await self._run(FINISH_TURN, finish)

    async def delete_turn(self, session_id: str, turn_id: str) -> None:
        """Delete a turn that does not run, with its steps, history messages, events and response (and that
        response's record).

        Raises:
            NotFoundError: no such turn in this session.
            ConflictError: the turn is running.
        """
        # The script fills in the id of the response the turn ran for, if any: it alone reads the turn.
        deletes = [ops.Delete(RESPONSE, "")]
        await self._run(
            DELETE_TURN, DeleteTurn(**self.kernel.embedded(deletes), session_id=session_id, turn_id=turn_id)
        )

    async def get_turn_record(self, session_id: str, turn_id: str) -> TurnRecord:
        """Return a turn's own columns or raise NotFoundError."""
        fields = cast(dict[str, str], await self._db.hgetall(self._keys.of(TURN, turn_id)))
        if fields.get("session_id") != session_id:
            raise NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found")
        return turn_of(turn_id, fields)

    async def turn_owners(self, turn_ids: list[str]) -> dict[str, Owner]:
        """The owners of those of these turns that exist and have one (stored in the turn's own hash, so gone with
        it)."""
        if not turn_ids:
            return {}
        ids = list(dict.fromkeys(turn_ids))
        async with self._db.pipeline(transaction=False) as pipe:
            for turn_id in ids:
                pipe.hget(self._keys.of(TURN, turn_id), "owner")
            stored = cast(list[str | None], await pipe.execute())
        return {turn_id: load_owner(value) for turn_id, value in zip(ids, stored, strict=True) if value is not None}

    async def session_queue(self, session_id: str) -> list[tuple[str, TurnStatus]]:
        """The ids and statuses of the session's running and queued turns, oldest first."""
        async with self._db.pipeline(transaction=True) as pipe:
            pipe.hget(self._keys.of(SESSION, session_id), "running")
            pipe.zrange(self._keys.of(SESSION_QUEUED, session_id), 0, -1)
            running, waiting = await pipe.execute()
        turn_ids = ([running] if running else []) + [turn_id for turn_id in waiting if turn_id != running]
        async with self._db.pipeline(transaction=True) as pipe:
            for turn_id in turn_ids:
                pipe.hmget(self._keys.of(TURN, turn_id), "session_id", "status", "seq")
            replies: list[list[str | None]] = await pipe.execute()
        live = [
            (int(seq), turn_id, cast(TurnStatus, status))
            for turn_id, (owner, status, seq) in zip(turn_ids, replies, strict=True)
            if owner == session_id and status in ("in_progress", "queued") and seq is not None
        ]
        return [(turn_id, status) for _, turn_id, status in sorted(live)]

    async def pending_step(self, turn_id: str) -> Step | None:
        """Return the tool-execution step a paused turn waits on (the latest pending one)."""
        latest = cast(list[str], await self._db.zrange(self._keys.of(PENDING, turn_id), 0, 0, desc=True))
        if not latest:
            return None
        body = cast(str | None, await self._db.hget(self._keys.of(STEP_BODIES, turn_id), latest[0]))
        return codec.load_step(body) if body is not None else None

    async def load_history(self, session_id: str, turn_id: str) -> list[Message]:
        """Messages of completed earlier turns, then this turn's own, each turn's kept together."""
        kept = self._histories.kept.kept(session_id)
        of = HistoryOf(session_id=session_id, turn_id=turn_id, epoch=kept.epoch, after=kept.after)
        return self._history(session_id, kept, await self._run(LOAD_HISTORY, of))

    async def turn_messages(self, session_id: str, turn_ids: list[str]) -> dict[str, list[Message]]:
        """Each named turn's own history messages, in the order stored, in one transaction."""
        if not turn_ids:
            return {}
        async with self._db.pipeline(transaction=True) as pipe:
            for turn_id in turn_ids:
                pipe.hget(self._keys.of(TURN, turn_id), "session_id")
                pipe.lrange(self._keys.of(MESSAGES, turn_id), 0, -1)
            replies: list[Any] = await pipe.execute()
        owned: dict[str, list[Message]] = {}
        for turn_id, owner, entries in zip(turn_ids, replies[::2], replies[1::2], strict=True):
            if owner == session_id and entries:
                owned[turn_id] = self._messages.load([message_row(entry) for entry in entries])
        return owned

    async def list_turns(self, session_ids: list[str], turn_ids: list[str] | None = None) -> list[Turn]:
        """Full turns (with completed steps) of the given sessions, in the order they started."""
        if not session_ids or turn_ids == []:
            return []
        if turn_ids is None:
            async with self._db.pipeline(transaction=False) as pipe:
                for session_id in session_ids:
                    pipe.zrange(self._keys.of(SESSION_TURNS, session_id), 0, -1)
                turn_ids = [turn_id for ids in await pipe.execute() for turn_id in ids]
        async with self._db.pipeline(transaction=True) as pipe:
            for turn_id in turn_ids:
                pipe.hgetall(self._keys.of(TURN, turn_id))
                pipe.zrange(self._keys.of(STEPS, turn_id), 0, -1)
                pipe.zrange(self._keys.of(PENDING, turn_id), 0, -1)
                pipe.hgetall(self._keys.of(STEP_BODIES, turn_id))
            replies: list[Any] = await pipe.execute()
        wanted, found = set(session_ids), dict[str, tuple[int, Turn]]()
        for index, turn_id in enumerate(turn_ids):
            fields, step_ids, pending, bodies = replies[4 * index : 4 * index + 4]
            if fields.get("session_id") not in wanted:
                continue
            steps = _completed(step_ids, pending, bodies)
            found[turn_id] = (int(fields["seq"]), turn_from_record(turn_of(turn_id, fields), steps))
        return [turn for _, turn in sorted(found.values(), key=lambda entry: entry[0])]

    async def renew_leases(self, turn_ids: list[str], until: datetime) -> list[str]:
        """Extend the leases of those of these turns that still run to ``until``; return the others' ids.

        A turn runs exactly while it is in the lease index, so ``ZADD XX`` renews only running turns.
        """
        if not turn_ids:
            return []
        leases = self._keys.global_(LEASES)
        async with self._db.pipeline(transaction=True) as pipe:
            for turn_id in turn_ids:
                pipe.zadd(leases, {turn_id: lease_score(until)}, xx=True)
                pipe.zscore(leases, turn_id)
            replies = await pipe.execute()
        return [turn_id for turn_id, score in zip(turn_ids, replies[1::2], strict=True) if score is None]

    async def fail_expired_turns(self, now: datetime, message: str) -> list[ExpiredTurn]:
        """Fail every running turn whose lease ended before ``now``, and the response it ran for.

        Returns:
            The turns failed by this call, soonest expired first.
        """
        expired = FailExpired(
            now=lease_score(now),
            code=FailureCode.INTERRUPTED,
            message=message,
            completed_at=codec.dump_time(now) or "",
        )
        return await self._run(FAIL_EXPIRED, expired)

    async def save_turn_events(self, turn_id: str, first_seq: int, events: list[str]) -> None:
        """Store a turn's event data, numbered from ``first_seq``; a number already stored keeps its event.

        Raises:
            NotFoundError: the turn does not exist.
        """
        if events:
            await self._run(SAVE_TURN_EVENTS, SaveTurnEvents(turn_id=turn_id, first_seq=first_seq, events=events))

    async def turn_events_after(self, turn_id: str, after: int) -> list[StoredEvent]:
        """The stored stream events of a turn with a number above ``after``, in order."""
        members = await self._db.zrangebyscore(self._keys.of(TURN_EVENTS, turn_id), f"({after}", "+inf")
        return [stored_event(cast(str, member)) for member in members]

    async def turn_event_count(self, turn_id: str) -> int:
        """How many stream events of a turn are stored."""
        return int(await self._db.zcard(self._keys.of(TURN_EVENTS, turn_id)))
