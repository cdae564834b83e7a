"""The SQLite tables of turns, steps and the history they build."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from typing import Any

from ferryman.api.agents import Step, Turn
from ferryman.api.content import Message
from ferryman.errors import ConflictError, FerrymanError, NotFoundError

from . import codec
from .base import ExpiredTurn, StepWrite, TurnRecord, turn_from_record
from .rows import TURN_COLUMNS, turn_record
from .sqlite_conn import SqliteRunner

# A turn's history: the messages of the session's completed turns that started before
# it, then its own, each turn's messages kept together.
_HISTORY = (
    "SELECT m.id, m.body FROM messages m JOIN turns t ON t.turn_id = m.turn_id "
    "WHERE m.session_id = ? AND (m.turn_id = ? OR (t.status = 'completed' "
    "AND t.id < (SELECT id FROM turns WHERE turn_id = ?))) ORDER BY t.id, m.id"
)


def _placeholders(count: int) -> str:
    return ",".join("?" * count)


class TurnTables:
    """Turns, steps and history messages, over a :class:`SqliteRunner`."""

    _db: SqliteRunner
    _messages: codec.MessageCache

    async def start_turn(self, record: TurnRecord, history: list[Message], load_history: bool = True) -> list[Message]:
        """Store a new running turn and its input messages; return the history it continues."""
        row = (
            record.turn_id,
            record.session_id,
            record.agent_id,
            record.status,
            codec.dump_inputs(record.input_messages),
            json.dumps(record.overrides),
            codec.dump_time(record.started_at),
            _epoch(record.lease_until),
        )

        def work(c: sqlite3.Connection) -> list[tuple[int, str]]:
            known = c.execute(
                "SELECT 1 FROM sessions WHERE session_id = ? AND agent_id IS ?", (record.session_id, record.agent_id)
            ).fetchone()
            if known is None:
                raise NotFoundError(f"session '{record.session_id}' of agent '{record.agent_id}' not found")
            c.execute(
                "INSERT INTO turns (turn_id, session_id, agent_id, status, input_messages, overrides, "
                "started_at, lease_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            self._append(c, record.session_id, record.turn_id, history)
            if not load_history:
                return []
            return c.execute(_HISTORY, (record.session_id, record.turn_id, record.turn_id)).fetchall()

        try:
            rows = await self._db.write(work)
        except sqlite3.IntegrityError as exc:
            raise ConflictError(
                f"session '{record.session_id}' already has a turn in progress; wait for it to finish"
            ) from exc
        return self._messages.load(rows)

    @staticmethod
    def _append(c: sqlite3.Connection, session_id: str, turn_id: str, messages: list[Message]) -> None:
        c.executemany(
            "INSERT INTO messages (session_id, turn_id, role, body) VALUES (?, ?, ?, ?)",
            [(session_id, turn_id, m.role, codec.dump_message(m)) for m in messages],
        )

    async def claim_resume(self, session_id: str, turn_id: str, lease_until: datetime) -> TurnRecord:
        """Move an awaiting turn back to running, under a lease, and return it."""
        record = await self.get_turn_record(session_id, turn_id)

        def work(c: sqlite3.Connection) -> int:
            return c.execute(
                "UPDATE turns SET status = 'in_progress', lease_until = ? "
                "WHERE turn_id = ? AND status = 'awaiting_input'",
                (_epoch(lease_until), turn_id),
            ).rowcount

        try:
            claimed = await self._db.write(work)
        except sqlite3.IntegrityError as exc:
            raise ConflictError(f"session '{session_id}' already has a turn in progress") from exc
        if not claimed:
            raise ConflictError(f"turn '{turn_id}' is not awaiting input (status: {record.status}); nothing to resume")
        record.status, record.lease_until = "in_progress", lease_until
        return record

    @classmethod
    def _write_step(cls, c: sqlite3.Connection, turn_id: str, session_id: str, write: StepWrite) -> None:
        step = write.step
        c.execute(
            "INSERT INTO steps (step_id, turn_id, step_type, pending, body) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(step_id) DO UPDATE SET pending = excluded.pending, body = excluded.body",
            (step.step_id, turn_id, step.step_type, int(write.pending), codec.dump_step(step)),
        )
        cls._append(c, session_id, turn_id, write.messages)

    async def save_step(self, turn_id: str, write: StepWrite, infer_iters: int) -> None:
        """Store or replace a step, its messages and the inference count, atomically."""

        def work(c: sqlite3.Connection) -> None:
            found = c.execute(
                "UPDATE turns SET infer_iters = ? WHERE turn_id = ? AND status = 'in_progress' RETURNING session_id",
                (infer_iters, turn_id),
            ).fetchone()
            if found is None:
                exists = c.execute("SELECT 1 FROM turns WHERE turn_id = ?", (turn_id,)).fetchone()
                raise _gone(turn_id, exists is not None)
            self._write_step(c, turn_id, found[0], write)

        await self._db.write(work)

    async def finish_turn(self, record: TurnRecord, last: StepWrite | None = None) -> None:
        """Store a turn's status, output, error and completion time, with its last step if given.

        Only a running turn is finished: one failed meanwhile (its lease ran out) keeps that end.
        """
        output = record.output_message.model_dump_json() if record.output_message else None
        error = record.error
        row = (
            record.status,
            output,
            record.infer_iters,
            error.code if error else None,
            error.message if error else None,
            codec.dump_time(record.completed_at),
            record.turn_id,
        )

        def work(c: sqlite3.Connection) -> None:
            finished = c.execute(
                "UPDATE turns SET status = ?, output_message = ?, infer_iters = ?, error_code = ?, "
                "error_message = ?, completed_at = ? WHERE turn_id = ? AND status = 'in_progress'",
                row,
            ).rowcount
            if finished and last is not None:
                self._write_step(c, record.turn_id, record.session_id, last)

        await self._db.write(work)

    async def get_turn_record(self, session_id: str, turn_id: str) -> TurnRecord:
        """Return a turn's own columns or raise NotFoundError."""
        row = await self._db.read(
            lambda c: c.execute(
                f"SELECT {TURN_COLUMNS} FROM turns WHERE turn_id = ? AND session_id = ?",  # noqa: S608
                (turn_id, session_id),
            ).fetchone()
        )
        if row is None:
            raise NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found")
        return turn_record(row, codec.load_time)

    async def pending_step(self, turn_id: str) -> Step | None:
        """Return the tool-execution step a paused turn waits on."""
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT body FROM steps WHERE turn_id = ? AND pending = 1 ORDER BY id DESC LIMIT 1",
                (turn_id,),
            ).fetchone()
        )
        return codec.load_step(row[0]) if row else None

    async def load_history(self, session_id: str, turn_id: str) -> list[Message]:
        """Messages of completed earlier turns, then this turn's own, each turn's kept together.

        Ordering by turn first matters: a turn resumed after later turns ran
        appends its messages late, yet its tool calls and their answers must
        stay adjacent.
        """
        rows = await self._db.read(lambda c: c.execute(_HISTORY, (session_id, turn_id, turn_id)).fetchall())
        return self._messages.load(rows)

    async def list_turns(self, session_ids: list[str], turn_ids: list[str] | None = None) -> list[Turn]:
        """Full turns of the given sessions, in the order they started."""
        if not session_ids:
            return []
        where = f"t.session_id IN ({_placeholders(len(session_ids))})"
        args: list[str] = list(session_ids)
        if turn_ids is not None:
            where += f" AND t.turn_id IN ({_placeholders(len(turn_ids))})"
            args += turn_ids
        turn_sql = f"SELECT {TURN_COLUMNS} FROM turns t WHERE {where} ORDER BY t.id"  # noqa: S608
        step_sql = (
            f"SELECT s.turn_id, s.body FROM steps s JOIN turns t ON t.turn_id = s.turn_id "  # noqa: S608
            f"WHERE {where} AND s.pending = 0 ORDER BY s.id"
        )

        def work(c: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
            return c.execute(turn_sql, args).fetchall(), c.execute(step_sql, args).fetchall()

        turn_rows, step_rows = await self._db.read(work)
        steps: dict[str, list[Step]] = {}
        for turn_id, body in step_rows:
            steps.setdefault(turn_id, []).append(codec.load_step(body))
        return [turn_from_record(turn_record(row, codec.load_time), steps.get(row[0], [])) for row in turn_rows]

    async def get_step(self, session_id: str, turn_id: str, step_id: str) -> Step:
        """Return one completed or pending step of a turn."""
        row = await self._db.read(
            lambda c: c.execute(
                "SELECT s.body FROM steps s JOIN turns t ON t.turn_id = s.turn_id "
                "WHERE s.step_id = ? AND s.turn_id = ? AND t.session_id = ?",
                (step_id, turn_id, session_id),
            ).fetchone()
        )
        if row is None:
            raise NotFoundError(f"step '{step_id}' of turn '{turn_id}' not found")
        return codec.load_step(row[0])

    async def save_turn_events(self, turn_id: str, first_seq: int, frames: list[str]) -> None:
        """Store a turn's stream events, numbered from ``first_seq``.

        Raises:
            NotFoundError: the turn does not exist (it may have been deleted while it ran).
        """
        rows = [(turn_id, first_seq + i, frame) for i, frame in enumerate(frames)]
        try:
            await self._db.write(
                lambda c: c.executemany("INSERT OR IGNORE INTO turn_events (turn_id, seq, body) VALUES (?, ?, ?)", rows)
            )
        except sqlite3.IntegrityError as exc:
            raise NotFoundError(f"turn '{turn_id}' not found") from exc

    async def turn_events_after(self, turn_id: str, after: int) -> list[str]:
        """Stored events of a turn numbered above ``after``."""
        rows = await self._db.read(
            lambda c: c.execute(
                "SELECT body FROM turn_events WHERE turn_id = ? AND seq > ? ORDER BY seq", (turn_id, after)
            ).fetchall()
        )
        return [row[0] for row in rows]

    async def turn_event_count(self, turn_id: str) -> int:
        """How many events of a turn are stored."""
        row = await self._db.read(
            lambda c: c.execute("SELECT count(*) FROM turn_events WHERE turn_id = ?", (turn_id,)).fetchone()
        )
        return int(row[0])

    async def renew_leases(self, turn_ids: list[str], until: datetime) -> list[str]:
        """Extend the leases of those of these turns that still run; return the ids of the others."""
        if not turn_ids:
            return []
        marks = _placeholders(len(turn_ids))
        rows = await self._db.write(
            lambda c: c.execute(
                f"UPDATE turns SET lease_until = ? WHERE status = 'in_progress' AND turn_id IN ({marks}) "  # noqa: S608
                "RETURNING turn_id",
                (_epoch(until), *turn_ids),
            ).fetchall()
        )
        renewed = {row[0] for row in rows}
        return [turn_id for turn_id in turn_ids if turn_id not in renewed]

    async def fail_expired_turns(self, now: datetime, message: str) -> list[ExpiredTurn]:
        """Fail the running turns whose lease ended before ``now``, and their responses."""
        completed_at = codec.dump_time(now)

        def work(c: sqlite3.Connection) -> list[ExpiredTurn]:
            rows = c.execute(
                "SELECT t.turn_id, r.response_id FROM turns t LEFT JOIN responses r ON r.turn_id = t.turn_id "
                "WHERE t.status = 'in_progress' AND (t.lease_until IS NULL OR t.lease_until < ?)",
                (_epoch(now),),
            ).fetchall()
            expired = [row[0] for row in rows]
            if not expired:
                return []
            marks = _placeholders(len(expired))
            c.execute(
                "UPDATE responses SET status = 'failed', body = json_set(body, '$.status', 'failed', "  # noqa: S608
                f"'$.error', json_object('code', 'interrupted', 'message', ?)) WHERE turn_id IN ({marks})",
                (message, *expired),
            )
            c.execute(
                "UPDATE turns SET status = 'failed', error_code = 'interrupted', error_message = ?, "  # noqa: S608
                f"completed_at = ? WHERE turn_id IN ({marks})",
                (message, completed_at, *expired),
            )
            return [ExpiredTurn(turn_id, response_id) for turn_id, response_id in rows]

        return await self._db.write(work)


def _gone(turn_id: str, exists: bool) -> FerrymanError:
    if exists:
        return ConflictError(f"turn '{turn_id}' no longer runs (it was failed or finished elsewhere)")
    return NotFoundError(f"turn '{turn_id}' no longer exists")


def _epoch(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment is not None else None
