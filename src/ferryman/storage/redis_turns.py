"""Turns, steps, the history they build, turn events and leases, in Redis.

One running turn per session holds across replicas: the session hash names its
running turn, and only the scripts that start or resume a turn set it, after
checking it is free, atomically. Running turns also sit in the ``leases`` sorted
set scored by lease end, so expired ones are a range query away.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import cast

from ferryman.api.agents import Step, Turn
from ferryman.api.content import Message
from ferryman.errors import ConflictError, NotFoundError

from . import codec
from .base import ExpiredTurn, StepWrite, TurnRecord, turn_from_record
from .redis_keys import STEP_BODIES, TURN, TURN_EVENTS, event_frame, message_row
from .redis_records import lease_score, pairs, turn_args, turn_of
from .redis_scripts import RedisBase, checked


def _step_args(write: StepWrite) -> list[str]:
    """A step's id, pending flag and body, then the history messages it adds."""
    step = write.step
    return [
        step.step_id,
        "1" if write.pending else "0",
        codec.dump_step(step),
        *(codec.dump_message(m) for m in write.messages),
    ]


class RedisTurns(RedisBase):
    """Turns, steps and history messages over the backend's scripts."""

    def _history(self, entries: list[str]) -> list[Message]:
        return self._messages.load([message_row(entry) for entry in entries])

    async def start_turn(self, record: TurnRecord, history: list[Message], load_history: bool = True) -> list[Message]:
        """Store a new running turn and its input messages; return the history it continues.

        Raises:
            NotFoundError: the session does not exist (for this agent).
            ConflictError: another turn of the session is running.
        """
        reply = await self._run(
            "start_turn",
            record.session_id,
            record.agent_id or "",
            record.turn_id,
            record.status,
            codec.dump_inputs(record.input_messages),
            json.dumps(record.overrides),
            codec.dump_time(record.started_at) or "",
            lease_score(record.lease_until),
            "1" if load_history else "0",
            *(codec.dump_message(m) for m in history),
        )
        entries = checked(
            reply,
            {
                "not_found": NotFoundError(f"session '{record.session_id}' of agent '{record.agent_id}' not found"),
                "conflict": ConflictError(
                    f"session '{record.session_id}' already has a turn in progress; wait for it to finish"
                ),
            },
        )
        return self._history(entries)

    async def claim_resume(self, session_id: str, turn_id: str, lease_until: datetime) -> TurnRecord:
        """Move an awaiting turn back to running, under a lease until ``lease_until``, and return it.

        Raises:
            NotFoundError: no such turn in this session.
            ConflictError: the turn is not awaiting input, or another turn of the session runs.
        """
        reply = await self._run("claim_resume", session_id, turn_id, lease_score(lease_until))
        if reply[0] == "not_awaiting":
            raise ConflictError(f"turn '{turn_id}' is not awaiting input (status: {reply[1]}); nothing to resume")
        [fields] = checked(
            reply,
            {
                "not_found": NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found"),
                "busy": ConflictError(f"session '{session_id}' already has a turn in progress"),
            },
        )
        record = turn_of(turn_id, pairs(fields))
        record.lease_until = lease_until
        return record

    async def save_step(self, turn_id: str, write: StepWrite, infer_iters: int) -> None:
        """Store or replace a step, its messages and the inference count, atomically."""
        reply = await self._run("save_step", turn_id, infer_iters, *_step_args(write))
        checked(
            reply,
            {
                "not_found": NotFoundError(f"turn '{turn_id}' no longer exists"),
                "conflict": ConflictError(f"turn '{turn_id}' no longer runs (it was failed or finished elsewhere)"),
            },
        )

    async def finish_turn(self, record: TurnRecord, last: StepWrite | None = None) -> None:
        """Store a turn's final or awaiting state with its last step; a turn that left running frees its session.

        A turn deleted meanwhile (its response or session was) stays deleted.
        """
        step = ["1", *_step_args(last)] if last is not None else ["0"]
        checked(await self._run("finish_turn", record.turn_id, *turn_args(record), *step), {})

    async def get_turn_record(self, session_id: str, turn_id: str) -> TurnRecord:
        """Return a turn's own columns or raise NotFoundError."""
        fields = cast(dict[str, str], await self._db.hgetall(self._keys.of(TURN, turn_id)))
        if fields.get("session_id") != session_id:
            raise NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found")
        return turn_of(turn_id, fields)

    async def pending_step(self, turn_id: str) -> Step | None:
        """Return the tool-execution step a paused turn waits on (the latest pending one)."""
        found = checked(await self._run("pending_step", turn_id), {})
        return codec.load_step(found[0]) if found else None

    async def load_history(self, session_id: str, turn_id: str) -> list[Message]:
        """Messages of completed earlier turns, then this turn's own, each turn's kept together."""
        return self._history(checked(await self._run("load_history", session_id, turn_id), {}))

    async def list_turns(self, session_ids: list[str], turn_ids: list[str] | None = None) -> list[Turn]:
        """Full turns (with completed steps) of the given sessions, in the order they started."""
        if not session_ids or turn_ids == []:
            return []
        by_turn = ["1", *turn_ids] if turn_ids is not None else ["0"]
        rows = checked(await self._run("list_turns", len(session_ids), *session_ids, *by_turn), {})
        found: dict[str, tuple[int, Turn]] = {}
        for turn_id, flat, bodies in rows:
            fields = pairs(flat)
            steps = [codec.load_step(body) for body in bodies]
            found[turn_id] = (int(fields["seq"]), turn_from_record(turn_of(turn_id, fields), steps))
        return [turn for _, turn in sorted(found.values(), key=lambda entry: entry[0])]

    async def get_step(self, session_id: str, turn_id: str, step_id: str) -> Step:
        """Return one completed or pending step of a turn, or raise NotFoundError."""
        async with self._db.pipeline(transaction=False) as pipe:
            pipe.hget(self._keys.of(TURN, turn_id), "session_id")
            pipe.hget(self._keys.of(STEP_BODIES, turn_id), step_id)
            owner, body = await pipe.execute()
        if owner != session_id or body is None:
            raise NotFoundError(f"step '{step_id}' of turn '{turn_id}' not found")
        return codec.load_step(body)

    async def renew_leases(self, turn_ids: list[str], until: datetime) -> list[str]:
        """Extend the leases of those of these turns that still run to ``until``; return the others' ids."""
        if not turn_ids:
            return []
        return cast(list[str], checked(await self._run("renew_leases", lease_score(until), *turn_ids), {}))

    async def fail_expired_turns(self, now: datetime, message: str) -> list[ExpiredTurn]:
        """Fail every running turn whose lease ended before ``now``, and the response it ran for.

        Returns:
            The turns failed by this call, soonest expired first.
        """
        reply = await self._run("fail_expired_turns", lease_score(now), message, codec.dump_time(now) or "")
        pairs = [entry.split(" ", 1) for entry in cast(list[str], checked(reply, {}))]
        return [ExpiredTurn(turn_id, response_id or None) for turn_id, response_id in pairs]

    async def save_turn_events(self, turn_id: str, first_seq: int, frames: list[str]) -> None:
        """Store a turn's stream events, numbered from ``first_seq`` (a number already stored keeps its event).

        Raises:
            NotFoundError: the turn does not exist.
        """
        if frames:
            reply = await self._run("save_turn_events", turn_id, first_seq, *frames)
            checked(reply, {"not_found": NotFoundError(f"turn '{turn_id}' not found")})

    async def turn_events_after(self, turn_id: str, after: int) -> list[str]:
        """The stored stream events of a turn with a number above ``after``, in order."""
        members = await self._db.zrangebyscore(self._keys.of(TURN_EVENTS, turn_id), f"({after}", "+inf")
        return [event_frame(cast(str, member)) for member in members]

    async def turn_event_count(self, turn_id: str) -> int:
        """How many stream events of a turn are stored."""
        return int(await self._db.zcard(self._keys.of(TURN_EVENTS, turn_id)))
