"""Turns, their steps, the history they build, their stream events and their leases."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from ferryman.api.agents import Step, Turn, TurnStatus
from ferryman.api.content import Message, TurnInputMessage
from ferryman.errors import ConflictError, FailureCode, FerrymanError, NotFoundError
from ferryman.storage import codec
from ferryman.storage.base import (
    ExpiredTurn,
    KeySettlement,
    ReadAlong,
    StepWrite,
    StoredEvent,
    TurnRecord,
    turn_from_record,
)
from ferryman.storage.domain.kinds import RESPONSE
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.owners import dump_owner, load_owner
from ferryman.storage.rows import turn_record
from ferryman.storage.sql import turn_statements as st
from ferryman.storage.sql.dialects import SqlDialect
from ferryman.storage.sql.history import HistoryRows, SqlHistories, changed, overtaken
from ferryman.storage.sql.idempotency import claimed, settled
from ferryman.storage.sql.kernel import SqlKernel
from ferryman.storage.sql.seam import Driver, ForeignKeyViolation, Row, UniqueViolation, Work, count, each, first, rows

_log = logging.getLogger(__name__)


def _append(session_id: str, turn_id: str, messages: list[Message]) -> Work[None]:
    yield each(
        "INSERT INTO messages (session_id, turn_id, role, body) VALUES (:session_id, :turn_id, :role, :body)",
        [
            {"session_id": session_id, "turn_id": turn_id, "role": m.role, "body": codec.dump_message(m)}
            for m in messages
        ],
    )


def _write_step(turn_id: str, session_id: str, write: StepWrite) -> Work[None]:
    step = write.step
    yield count(
        "INSERT INTO steps (step_id, turn_id, step_type, pending, body) "
        "VALUES (:step_id, :turn_id, :step_type, :pending, :body) "
        "ON CONFLICT (step_id) DO UPDATE SET pending = excluded.pending, body = excluded.body",
        step_id=step.step_id,
        turn_id=turn_id,
        step_type=step.step_type,
        pending=write.pending,
        body=codec.dump_step(step),
    )
    yield from _append(session_id, turn_id, write.messages)


def _failed_body(response_id: str, body: str, message: str) -> str:
    """A stored response body with status ``failed`` and error ``interrupted``/``message``.

    A body that is not a JSON object is kept as it is (its status column is failed all the same),
    so that one damaged row cannot stop the sweep from failing the others.
    """
    try:
        stored = json.loads(body)
    except ValueError:
        stored = None
    if not isinstance(stored, dict):
        _log.warning("response %r has an unreadable stored body; it is failed without an error", response_id)
        return body
    stored["status"] = "failed"
    stored["error"] = {"code": FailureCode.INTERRUPTED.value, "message": message}
    return json.dumps(stored, separators=(",", ":"))


def _gone(turn_id: str, exists: bool) -> FerrymanError:
    if exists:
        return ConflictError(f"turn '{turn_id}' no longer runs (it was failed or finished elsewhere)")
    return NotFoundError(f"turn '{turn_id}' no longer exists")


def insert_turn(d: SqlDialect, record: TurnRecord, history: list[Message], owner: Owner | None) -> Work[Row]:
    """Store a new running or queued turn, its history messages and its owner (None: none), in the unit of work
    that yields from this, holding its session's row until the unit ends; return that row (its history epoch).

    Raises:
        NotFoundError: the session does not exist (for this agent).
        ConflictError: another turn of the session is running, or (for a running turn) some wait queued.
    """
    # The session's row is held until the turn is stored: turns of a session start one at a time,
    # so a running turn cannot start beside a queued one being stored.
    known: Row | None = yield st.session_anchor(d).first(session_id=record.session_id, agent_id=record.agent_id)
    if known is None:
        raise NotFoundError(f"session '{record.session_id}' of agent '{record.agent_id}' not found")
    if record.status == "in_progress":
        waiting = yield st.queued(d).first(session_id=record.session_id)
        if waiting is not None:
            raise ConflictError(
                f"session '{record.session_id}' has turns queued; send the turn with a multitask_strategy "
                "to queue it behind them, or wait for them to finish"
            )
    try:
        yield count(
            "INSERT INTO turns (turn_id, session_id, agent_id, status, input_messages, overrides, "
            "started_at, lease_until, owner) VALUES (:turn_id, :session_id, :agent_id, :status, :inputs, "
            ":overrides, :started_at, :lease_until, :owner)",
            turn_id=record.turn_id,
            session_id=record.session_id,
            agent_id=record.agent_id,
            status=record.status,
            inputs=codec.dump_inputs(record.input_messages),
            overrides=json.dumps(record.overrides),
            started_at=d.stamp(record.started_at),
            lease_until=d.epoch(record.lease_until),
            owner=None if owner is None else dump_owner(owner),
        )
    except UniqueViolation as exc:
        raise ConflictError(
            f"session '{record.session_id}' already has a turn in progress; wait for it to finish"
        ) from exc
    yield from _append(record.session_id, record.turn_id, history)
    return known


class TurnTables:
    """Turns, steps, history messages and turn events, over a :class:`Driver`."""

    _db: Driver
    _messages: codec.MessageCache
    _histories: SqlHistories
    kernel: SqlKernel

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
        return the history it continues (and ``along``'s reads, in the same transaction)."""
        d = self._db.dialect
        reads = self.kernel.reads_within(along.ops) if along is not None and along.ops else None

        def work() -> Work[HistoryRows | None]:
            yield from claimed(d, settle)  # first: a repeat of a running turn's request replays it, never a 409
            known = yield from insert_turn(d, record, history, owner)
            yield from settled(d, settle)
            if reads is not None and along is not None:
                along.results = yield from reads
            if not load_history:
                return None
            return (yield from self._histories.read(record.session_id, record.turn_id, known[0], None))

        history = self._histories.loaded(await self._db.write(work()))
        if along is not None:
            along.written = True
        return history

    async def save_step(self, turn_id: str, write: StepWrite, infer_iters: int) -> None:
        """Store or replace a step, its messages and the inference count, atomically."""

        def work() -> Work[None]:
            found = yield first(
                "UPDATE turns SET infer_iters = :infer_iters WHERE turn_id = :turn_id AND status = 'in_progress' "
                "RETURNING session_id",
                infer_iters=infer_iters,
                turn_id=turn_id,
            )
            if found is None:
                exists = yield first("SELECT 1 FROM turns WHERE turn_id = :turn_id", turn_id=turn_id)
                raise _gone(turn_id, exists is not None)
            yield from _write_step(turn_id, found[0], write)

        await self._db.write(work())

    async def redact_turn_input(self, turn_id: str, inputs: list[TurnInputMessage], messages: list[Message]) -> None:
        """Replace a running turn's input messages and its own history messages, atomically."""

        def work() -> Work[None]:
            found = yield first(
                "UPDATE turns SET input_messages = :inputs WHERE turn_id = :turn_id AND status = 'in_progress' "
                "RETURNING session_id",
                inputs=codec.dump_inputs(inputs),
                turn_id=turn_id,
            )
            if found is None:
                exists = yield first("SELECT 1 FROM turns WHERE turn_id = :turn_id", turn_id=turn_id)
                raise _gone(turn_id, exists is not None)
            # New rows first, so that their ids are above the old ones: SQLite (no AUTOINCREMENT) could
            # hand out a deleted top id again, and a cached message of that id would stand for the new row.
            last = yield first("SELECT max(id) FROM messages WHERE turn_id = :turn_id", turn_id=turn_id)
            yield from _append(found[0], turn_id, messages)
            if last is not None and last[0] is not None:
                yield count(
                    "DELETE FROM messages WHERE turn_id = :turn_id AND id <= :last", turn_id=turn_id, last=last[0]
                )

        await self._db.write(work())

    async def finish_turn(
        self, record: TurnRecord, last: StepWrite | None = None, overrides: dict[str, Any] | None = None
    ) -> None:
        """Store a turn's status, output, error and completion time, with its last step (and new ``overrides``)
        if given.

        Only a running turn is finished: one failed meanwhile (its lease ran out) keeps that end.
        """
        error = record.error
        d = self._db.dialect

        def work() -> Work[None]:
            if record.status == "completed":
                # Before the turn's row: the session's row, when the bump takes it, is taken first, as a start and a
                # session's delete take them (the other order deadlocks on PostgreSQL with a turn starting). A
                # turn that turns out not to be running bumps for nothing: the next read only reads it all again.
                yield from overtaken(record.session_id, record.turn_id)
            finished = yield st.finish(d, overrides=overrides is not None).count(
                overrides=None if overrides is None else json.dumps(overrides),
                status=record.status,
                output=record.output_message.model_dump_json() if record.output_message else None,
                infer_iters=record.infer_iters,
                code=error.code if error else None,
                message=error.message if error else None,
                completed_at=d.stamp(record.completed_at),
                turn_id=record.turn_id,
            )
            if finished and last is not None:
                yield from _write_step(record.turn_id, record.session_id, last)

        await self._db.write(work())

    async def delete_turn(self, session_id: str, turn_id: str) -> None:
        """Delete a turn that does not run; its steps, messages, events and response go by cascade, and the
        response's record with them."""

        def work() -> Work[None]:
            row = yield first(
                "SELECT status, (SELECT response_id FROM responses WHERE turn_id = :turn_id) FROM turns "
                "WHERE turn_id = :turn_id AND session_id = :session_id",
                turn_id=turn_id,
                session_id=session_id,
            )
            if row is None:
                raise NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found")
            if row[0] == "completed":  # the session's row before the turn's, as everywhere
                yield from changed(session_id)
            deleted = yield count(
                "DELETE FROM turns WHERE turn_id = :turn_id AND status <> 'in_progress'", turn_id=turn_id
            )
            if not deleted:
                raise ConflictError(f"turn '{turn_id}' is running; it cannot be deleted")
            if row[1] is not None:  # the response it ran for went by cascade: its record (and input items) too
                yield from self.kernel.writes_within([ops.Delete(RESPONSE, row[1])])

        await self._db.write(work())

    async def turn_owners(self, turn_ids: list[str]) -> dict[str, Owner]:
        """The owners of those of these turns that exist and have one (stored in the turn's own row, so gone
        with it)."""
        if not turn_ids:
            return {}
        d = self._db.dialect
        found = await self._db.read(st.owners(d).rows(ids=d.array(sorted(set(turn_ids)))))
        return {row[0]: load_owner(row[1]) for row in found}

    async def get_turn_record(self, session_id: str, turn_id: str) -> TurnRecord:
        """Return a turn's own columns or raise NotFoundError."""
        d = self._db.dialect
        row = await self._db.read(st.get_turn(d).first(turn_id=turn_id, session_id=session_id))
        if row is None:
            raise NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found")
        return turn_record(row, d.read_stamp)

    async def session_queue(self, session_id: str) -> list[tuple[str, TurnStatus]]:
        """The ids and statuses of the session's running and queued turns, oldest first."""
        found = await self._db.read(st.session_queue(self._db.dialect).rows(session_id=session_id))
        return [(row[0], row[1]) for row in found]

    async def pending_step(self, turn_id: str) -> Step | None:
        """Return the tool-execution step a paused turn waits on."""
        row = await self._db.read(
            first(
                "SELECT body FROM steps WHERE turn_id = :turn_id AND pending ORDER BY id DESC LIMIT 1", turn_id=turn_id
            )
        )
        return codec.load_step(row[0]) if row else None

    async def load_history(self, session_id: str, turn_id: str) -> list[Message]:
        """Messages of completed earlier turns, then this turn's own, each turn's kept together (of a turn
        not stored yet: every completed turn's).

        Ordering by turn first matters: a turn resumed after later turns ran
        appends its messages late, yet its tool calls and their answers must
        stay adjacent.
        """
        read = await self._db.read(self._histories.read_alone(session_id, turn_id))
        return self._histories.gone(session_id) if read is None else self._histories.loaded(read)

    async def turn_messages(self, session_id: str, turn_ids: list[str]) -> dict[str, list[Message]]:
        """Each named turn's own history messages, in the order stored, in one read."""
        if not turn_ids:
            return {}
        d = self._db.dialect
        found = await self._db.read(st.turn_messages(d).rows(session_id=session_id, turns=d.array(turn_ids)))
        loaded = self._messages.load([(r[1], r[2]) for r in found])
        owned: dict[str, list[Message]] = {}
        for row, message in zip(found, loaded, strict=True):
            owned.setdefault(row[0], []).append(message)
        return owned

    async def list_turns(self, session_ids: list[str], turn_ids: list[str] | None = None) -> list[Turn]:
        """Full turns of the given sessions, in the order they started."""
        if not session_ids:
            return []
        d = self._db.dialect
        some = turn_ids is not None
        params = {"sessions": d.array(session_ids)}
        if turn_ids is not None:
            params["turns"] = d.array(turn_ids)

        def work() -> Work[tuple[list[Row], list[Row]]]:
            turn_rows = yield st.listed_turns(d, some=some).rows(**params)
            step_rows = yield st.listed_steps(d, some=some).rows(**params)
            return turn_rows, step_rows

        turn_rows, step_rows = await self._db.read(work())
        steps: dict[str, list[Step]] = {}
        for turn_id, body in step_rows:
            steps.setdefault(turn_id, []).append(codec.load_step(body))
        return [turn_from_record(turn_record(row, d.read_stamp), steps.get(row[0], [])) for row in turn_rows]

    async def save_turn_events(self, turn_id: str, first_seq: int, events: list[str]) -> None:
        """Store a turn's stream events (JSON data), numbered from ``first_seq``; a stored number keeps its event.

        Raises:
            NotFoundError: the turn does not exist (it may have been deleted while it ran).
        """
        query = each(
            "INSERT INTO turn_events (turn_id, seq, body) VALUES (:turn_id, :seq, :body) "
            "ON CONFLICT (turn_id, seq) DO NOTHING",
            [{"turn_id": turn_id, "seq": first_seq + i, "body": data} for i, data in enumerate(events)],
        )
        try:
            await self._db.write(query)
        except ForeignKeyViolation as exc:
            raise NotFoundError(f"turn '{turn_id}' not found") from exc

    async def turn_events_after(self, turn_id: str, after: int) -> list[StoredEvent]:
        """Stored events of a turn numbered above ``after``."""
        found = await self._db.read(
            rows(
                "SELECT seq, body FROM turn_events WHERE turn_id = :turn_id AND seq > :after ORDER BY seq",
                turn_id=turn_id,
                after=after,
            )
        )
        return [StoredEvent(row[0], row[1]) for row in found]

    async def turn_event_count(self, turn_id: str) -> int:
        """How many events of a turn are stored."""
        row = await self._db.read(first("SELECT count(*) FROM turn_events WHERE turn_id = :turn_id", turn_id=turn_id))
        return int(row[0]) if row else 0

    async def renew_leases(self, turn_ids: list[str], until: datetime) -> list[str]:
        """Extend the leases of those of these turns that still run; return the ids of the others."""
        if not turn_ids:
            return []
        d = self._db.dialect
        found = await self._db.write(st.renew_leases(d).rows(until=d.epoch(until), ids=d.array(turn_ids)))
        renewed = {row[0] for row in found}
        return [turn_id for turn_id in turn_ids if turn_id not in renewed]

    async def fail_expired_turns(self, now: datetime, message: str) -> list[ExpiredTurn]:
        """Fail the running turns whose lease ended before ``now``, and their responses."""
        d = self._db.dialect

        def work() -> Work[list[ExpiredTurn]]:
            found: list[Row] = yield st.expired(d).rows(now=d.epoch(now))
            if not found:
                return []
            expired = d.array([row[0] for row in found])
            # The update locks the rows and returns their latest bodies, which are merged here:
            # PostgreSQL's jsonb refuses the "\u0000" that a response's text may hold.
            failing: list[Row] = yield st.fail_responses(d).rows(expired=expired)
            yield each(
                "UPDATE responses SET body = :body WHERE response_id = :response_id",
                [{"response_id": row[0], "body": _failed_body(row[0], row[1], message)} for row in failing],
            )
            yield st.fail_turns(d).count(message=message, completed_at=d.stamp(now), expired=expired)
            return [ExpiredTurn(row[0], row[1], row[2]) for row in found]

        return await self._db.write(work())
