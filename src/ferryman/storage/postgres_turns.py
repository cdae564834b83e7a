"""The PostgreSQL tables of turns, steps and the history they build."""

from __future__ import annotations

import json
from datetime import datetime

import asyncpg

from ferryman.api.agents import Step, Turn
from ferryman.api.content import Message
from ferryman.errors import ConflictError, NotFoundError

from . import codec
from .base import ExpiredTurn, StepWrite, TurnRecord, turn_from_record
from .rows import TURN_COLUMNS, turn_record

# A turn's history: the messages of the session's completed turns that started before
# it, then its own, each turn's messages kept together (as in the SQLite backend).
_HISTORY = (
    "SELECT m.id, m.body FROM messages m JOIN turns t ON t.turn_id = m.turn_id "
    "WHERE m.session_id = $1 AND (m.turn_id = $2 OR (t.status = 'completed' "
    "AND t.id < (SELECT id FROM turns WHERE turn_id = $2))) ORDER BY t.id, m.id"
)


def _as_is(moment: datetime | None) -> datetime | None:
    return moment  # asyncpg already returns aware datetimes


async def _append(c: asyncpg.Connection, session_id: str, turn_id: str, messages: list[Message]) -> None:
    if messages:
        await c.executemany(
            "INSERT INTO messages (session_id, turn_id, role, body) VALUES ($1, $2, $3, $4)",
            [(session_id, turn_id, m.role, codec.dump_message(m)) for m in messages],
        )


async def _write_step(c: asyncpg.Connection, turn_id: str, session_id: str, write: StepWrite) -> None:
    step = write.step
    await c.execute(
        "INSERT INTO steps (step_id, turn_id, step_type, pending, body) VALUES ($1, $2, $3, $4, $5) "
        "ON CONFLICT (step_id) DO UPDATE SET pending = excluded.pending, body = excluded.body",
        step.step_id,
        turn_id,
        step.step_type,
        write.pending,
        codec.dump_step(step),
    )
    await _append(c, session_id, turn_id, write.messages)


class PgTurnTables:
    """Turns, steps and history messages over an asyncpg pool."""

    _pool: asyncpg.Pool
    _messages: codec.MessageCache

    async def start_turn(self, record: TurnRecord, history: list[Message], load_history: bool = True) -> list[Message]:
        """Store a new running turn and its input messages; return the history it continues."""
        async with self._pool.acquire() as c, c.transaction():
            known = await c.fetchval(
                "SELECT 1 FROM sessions WHERE session_id = $1 AND agent_id IS NOT DISTINCT FROM $2",
                record.session_id,
                record.agent_id,
            )
            if known is None:
                raise NotFoundError(f"session '{record.session_id}' of agent '{record.agent_id}' not found")
            try:
                await c.execute(
                    "INSERT INTO turns (turn_id, session_id, agent_id, status, input_messages, overrides, "
                    "started_at, lease_until) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    record.turn_id,
                    record.session_id,
                    record.agent_id,
                    record.status,
                    codec.dump_inputs(record.input_messages),
                    json.dumps(record.overrides),
                    record.started_at,
                    record.lease_until,
                )
            except asyncpg.UniqueViolationError as exc:
                raise ConflictError(
                    f"session '{record.session_id}' already has a turn in progress; wait for it to finish"
                ) from exc
            await _append(c, record.session_id, record.turn_id, history)
            rows = await c.fetch(_HISTORY, record.session_id, record.turn_id) if load_history else []
        return self._messages.load([(r[0], r[1]) for r in rows])

    async def claim_resume(self, session_id: str, turn_id: str, lease_until: datetime) -> TurnRecord:
        """Move an awaiting turn back to running, under a lease, and return it."""
        record = await self.get_turn_record(session_id, turn_id)
        try:
            status = await self._pool.execute(
                "UPDATE turns SET status = 'in_progress', lease_until = $2 "
                "WHERE turn_id = $1 AND status = 'awaiting_input'",
                turn_id,
                lease_until,
            )
        except asyncpg.UniqueViolationError as exc:
            raise ConflictError(f"session '{session_id}' already has a turn in progress") from exc
        if status.endswith(" 0"):
            raise ConflictError(f"turn '{turn_id}' is not awaiting input (status: {record.status}); nothing to resume")
        record.status, record.lease_until = "in_progress", lease_until
        return record

    async def save_step(self, turn_id: str, write: StepWrite, infer_iters: int) -> None:
        """Store or replace a step, its messages and the inference count, atomically."""
        async with self._pool.acquire() as c, c.transaction():
            session_id = await c.fetchval(
                "UPDATE turns SET infer_iters = $1 WHERE turn_id = $2 AND status = 'in_progress' RETURNING session_id",
                infer_iters,
                turn_id,
            )
            if session_id is None:
                exists = await c.fetchval("SELECT 1 FROM turns WHERE turn_id = $1", turn_id)
                if exists:
                    raise ConflictError(f"turn '{turn_id}' no longer runs (it was failed or finished elsewhere)")
                raise NotFoundError(f"turn '{turn_id}' no longer exists")
            await _write_step(c, turn_id, session_id, write)

    async def finish_turn(self, record: TurnRecord, last: StepWrite | None = None) -> None:
        """Store a turn's status, output, error and completion time, with its last step if given.

        Only a running turn is finished: one failed meanwhile (its lease ran out) keeps that end.
        """
        error = record.error
        async with self._pool.acquire() as c, c.transaction():
            status = await c.execute(
                "UPDATE turns SET status = $1, output_message = $2, infer_iters = $3, error_code = $4, "
                "error_message = $5, completed_at = $6 WHERE turn_id = $7 AND status = 'in_progress'",
                record.status,
                record.output_message.model_dump_json() if record.output_message else None,
                record.infer_iters,
                error.code if error else None,
                error.message if error else None,
                record.completed_at,
                record.turn_id,
            )
            if last is not None and status.endswith(" 1"):
                await _write_step(c, record.turn_id, record.session_id, last)

    async def get_turn_record(self, session_id: str, turn_id: str) -> TurnRecord:
        """Return a turn's own columns or raise NotFoundError."""
        row = await self._pool.fetchrow(
            f"SELECT {TURN_COLUMNS} FROM turns WHERE turn_id = $1 AND session_id = $2",  # noqa: S608
            turn_id,
            session_id,
        )
        if row is None:
            raise NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found")
        return turn_record(row, _as_is)

    async def pending_step(self, turn_id: str) -> Step | None:
        """Return the tool-execution step a paused turn waits on."""
        body = await self._pool.fetchval(
            "SELECT body FROM steps WHERE turn_id = $1 AND pending ORDER BY id DESC LIMIT 1", turn_id
        )
        return codec.load_step(body) if body else None

    async def load_history(self, session_id: str, turn_id: str) -> list[Message]:
        """Messages of completed earlier turns, then this turn's own, each turn's kept together."""
        rows = await self._pool.fetch(_HISTORY, session_id, turn_id)
        return self._messages.load([(r[0], r[1]) for r in rows])

    async def list_turns(self, session_ids: list[str], turn_ids: list[str] | None = None) -> list[Turn]:
        """Full turns of the given sessions, in the order they started."""
        if not session_ids:
            return []
        where = "t.session_id = ANY($1::text[]) AND ($2::text[] IS NULL OR t.turn_id = ANY($2::text[]))"
        async with self._pool.acquire() as c:
            turn_rows = await c.fetch(
                f"SELECT {TURN_COLUMNS} FROM turns t WHERE {where} ORDER BY t.id",  # noqa: S608
                session_ids,
                turn_ids,
            )
            step_rows = await c.fetch(
                "SELECT s.turn_id, s.body FROM steps s JOIN turns t ON t.turn_id = s.turn_id "  # noqa: S608
                f"WHERE {where} AND NOT s.pending ORDER BY s.id",
                session_ids,
                turn_ids,
            )
        steps: dict[str, list[Step]] = {}
        for turn_id, body in step_rows:
            steps.setdefault(turn_id, []).append(codec.load_step(body))
        return [turn_from_record(turn_record(row, _as_is), steps.get(row[0], [])) for row in turn_rows]

    async def get_step(self, session_id: str, turn_id: str, step_id: str) -> Step:
        """Return one completed or pending step of a turn."""
        body = await self._pool.fetchval(
            "SELECT s.body FROM steps s JOIN turns t ON t.turn_id = s.turn_id "
            "WHERE s.step_id = $1 AND s.turn_id = $2 AND t.session_id = $3",
            step_id,
            turn_id,
            session_id,
        )
        if body is None:
            raise NotFoundError(f"step '{step_id}' of turn '{turn_id}' not found")
        return codec.load_step(body)

    async def save_turn_events(self, turn_id: str, first_seq: int, frames: list[str]) -> None:
        """Store a turn's stream events, numbered from ``first_seq``.

        Raises:
            NotFoundError: the turn does not exist (it may have been deleted while it ran).
        """
        try:
            await self._pool.executemany(
                "INSERT INTO turn_events (turn_id, seq, body) VALUES ($1, $2, $3) "
                "ON CONFLICT (turn_id, seq) DO NOTHING",
                [(turn_id, first_seq + i, frame) for i, frame in enumerate(frames)],
            )
        except asyncpg.ForeignKeyViolationError as exc:
            raise NotFoundError(f"turn '{turn_id}' not found") from exc

    async def turn_events_after(self, turn_id: str, after: int) -> list[str]:
        """Stored events of a turn numbered above ``after``."""
        rows = await self._pool.fetch(
            "SELECT body FROM turn_events WHERE turn_id = $1 AND seq > $2 ORDER BY seq", turn_id, after
        )
        return [row[0] for row in rows]

    async def turn_event_count(self, turn_id: str) -> int:
        """How many events of a turn are stored."""
        return int(await self._pool.fetchval("SELECT count(*) FROM turn_events WHERE turn_id = $1", turn_id))

    async def renew_leases(self, turn_ids: list[str], until: datetime) -> list[str]:
        """Extend the leases of those of these turns that still run; return the ids of the others."""
        if not turn_ids:
            return []
        rows = await self._pool.fetch(
            "UPDATE turns SET lease_until = $2 WHERE status = 'in_progress' AND turn_id = ANY($1::text[]) "
            "RETURNING turn_id",
            turn_ids,
            until,
        )
        renewed = {row[0] for row in rows}
        return [turn_id for turn_id in turn_ids if turn_id not in renewed]

    async def fail_expired_turns(self, now: datetime, message: str) -> list[ExpiredTurn]:
        """Fail the running turns whose lease ended before ``now``, and their responses.

        ``SKIP LOCKED`` lets replicas sweep at the same moment without waiting on each other.
        """
        async with self._pool.acquire() as c, c.transaction():
            rows = await c.fetch(
                "SELECT t.turn_id, r.response_id FROM turns t LEFT JOIN responses r ON r.turn_id = t.turn_id "
                "WHERE t.status = 'in_progress' AND (t.lease_until IS NULL OR t.lease_until < $1) "
                "FOR UPDATE OF t SKIP LOCKED",
                now,
            )
            expired = [row[0] for row in rows]
            if not expired:
                return []
            await c.execute(
                "UPDATE responses SET status = 'failed', body = (body::jsonb || jsonb_build_object('status', "
                "'failed', 'error', jsonb_build_object('code', 'interrupted', 'message', $2::text)))::text "
                "WHERE turn_id = ANY($1::text[])",
                expired,
                message,
            )
            await c.execute(
                "UPDATE turns SET status = 'failed', error_code = 'interrupted', error_message = $2, "
                "completed_at = $3 WHERE turn_id = ANY($1::text[])",
                expired,
                message,
                now,
            )
        return [ExpiredTurn(row[0], row[1]) for row in rows]
