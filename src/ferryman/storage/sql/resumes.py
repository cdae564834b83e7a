"""Resuming turns: the paused turn read in one trip, then moved back to running in one write that reads along.

A resume reads what it answers (:meth:`ResumeTables.resume_point`), then claims the turn
(:meth:`ResumeTables.claim_resume`): only while it still waits on the step the resume read, with the
history the run continues and the caller's kernel reads answered in the same transaction.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ferryman.api.agents import TurnStatus
from ferryman.errors import ConflictError, NotFoundError
from ferryman.storage import codec
from ferryman.storage.base import KeySettlement, ReadAlong, Resumed, ResumePoint
from ferryman.storage.rows import turn_record
from ferryman.storage.sql.dialects import SqlDialect
from ferryman.storage.sql.history import HistoryRows, SqlHistories
from ferryman.storage.sql.idempotency import claimed, settled
from ferryman.storage.sql.kernel import SqlKernel
from ferryman.storage.sql.seam import Driver, Row, UniqueViolation, Work, first, rows
from ferryman.storage.sql.turn_statements import get_turn, resume


def _resumed(
    d: SqlDialect,
    session_id: str,
    turn_id: str,
    lease: Any,
    overrides: dict[str, Any] | None,
    expected: TurnStatus,
    pending: str | None,
) -> Work[Row]:
    """Move the turn to running if it is ``expected`` (and still waits on step ``pending``); its row then."""
    statement = resume(d, overrides=overrides is not None, pending=pending is not None)
    try:
        found: Row | None = yield statement.first(
            lease_until=lease,
            overrides=None if overrides is None else json.dumps(overrides),
            turn_id=turn_id,
            session_id=session_id,
            expected=expected,
            pending=pending,
        )
    except UniqueViolation as exc:
        raise ConflictError(f"session '{session_id}' already has a turn in progress") from exc
    if found is None:  # raised in the unit: a key it claimed goes back with it
        status: Row | None = yield first(
            "SELECT status FROM turns WHERE turn_id = :turn_id AND session_id = :session_id",
            turn_id=turn_id,
            session_id=session_id,
        )
        if status is None:
            raise NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found")
        if status[0] == expected:
            raise ConflictError(f"turn '{turn_id}' no longer waits on step '{pending}': it was answered meanwhile")
        raise ConflictError(f"turn '{turn_id}' is not {expected} (status: {status[0]}); nothing to run")
    return found


class ResumeTables:
    """Resuming turns, over a :class:`Driver`."""

    _db: Driver
    _histories: SqlHistories
    kernel: SqlKernel

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
        """Move an awaiting (or ``expected``) turn to running, under a lease (with new ``overrides``, if given, and
        only while it waits on step ``pending``, if given), with its request's idempotency key outcome; return it
        (and its history, and ``along``'s reads, when asked), in one transaction."""
        d = self._db.dialect
        reads = self.kernel.reads_within(along.ops) if along is not None and along.ops else None

        def work() -> Work[tuple[Row, HistoryRows | None]]:
            yield from claimed(d, settle)
            resumed = yield from _resumed(d, session_id, turn_id, d.epoch(lease_until), overrides, expected, pending)
            yield from settled(d, settle)
            if reads is not None and along is not None:
                along.results = yield from reads
            history = (yield from self._histories.read_alone(session_id, turn_id)) if load_history else None
            return resumed, history

        row, history = await self._db.write(work())
        if along is not None:
            along.written = True
        record = turn_record(row, d.read_stamp)
        record.lease_until = lease_until
        return Resumed(record, self._histories.loaded(history))

    async def resume_point(self, agent_id: str, session_id: str, turn_id: str) -> ResumePoint:
        """Read a turn of the agent's session with its steps and its events' count, in one read."""
        d = self._db.dialect

        def work() -> Work[tuple[Row, list[Row], int]]:
            session = yield first(
                "SELECT 1 FROM sessions WHERE session_id = :session_id AND agent_id = :agent_id",
                session_id=session_id,
                agent_id=agent_id,
            )
            if session is None:
                raise NotFoundError(f"session '{session_id}' of agent '{agent_id}' not found")
            turn = yield get_turn(d).first(turn_id=turn_id, session_id=session_id)
            if turn is None:
                raise NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found")
            steps = yield rows("SELECT body, pending FROM steps WHERE turn_id = :turn_id ORDER BY id", turn_id=turn_id)
            events = yield first("SELECT count(*) FROM turn_events WHERE turn_id = :turn_id", turn_id=turn_id)
            return turn, steps, int(events[0]) if events else 0

        turn, steps, events = await self._db.read(work())
        pending = [codec.load_step(body) for body, waits in steps if waits]
        done = [codec.load_step(body) for body, waits in steps if not waits]
        record = turn_record(turn, d.read_stamp)
        return ResumePoint(record, done, pending[-1] if pending else None, events)
