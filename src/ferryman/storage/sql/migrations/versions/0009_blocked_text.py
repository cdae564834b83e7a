"""What a shield blocked, stored raw by earlier versions, is withheld in place (a data revision).

A turn whose input a shield blocked gets placeholders for its input messages, its history
messages (then its refusal, as this version joins it to the history) and its turn events'
copies of its input; the response it ran for, its input items and their copies in the
conversation. A call whose arguments a tool input shield blocked has them withheld in the
turn's steps, history messages, events and output (a paused turn's). ``ferryman.storage.blocked_text`` says what is
written; a turn already converted is left as it is. There is no way back: ``downgrade``
changes nothing (the raw text is gone, which is the point).

Revision ID: 0009_blocked_text
Revises: 0008_shields
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from ferryman.storage.blocked_text import BLOCKING_MARKS, StoredTurn, withheld_item, withhold

revision = "0009_blocked_text"
down_revision = "0008_shields"
branch_labels = None
depends_on = None

# A blocked turn has a step holding one of the marks: the candidates to read (``withhold`` tells for sure).
_CANDIDATES = sa.text(
    "SELECT DISTINCT turn_id FROM steps WHERE (step_type = 'shield_call' AND body LIKE :blocking) "
    "OR (step_type = 'tool_execution' AND body LIKE :blocked_call)"
)


def _all(sql: str, **params: Any) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in op.get_bind().execute(sa.text(sql), params)]


def _write(sql: str, rows: list[dict[str, Any]]) -> None:
    if rows:
        op.get_bind().execute(sa.text(sql), rows)


def upgrade() -> None:
    """Withhold the blocked text of every turn that holds some."""
    blocking, blocked_call = BLOCKING_MARKS
    params = {"blocking": f"%{blocking}%", "blocked_call": f"%{blocked_call}%"}
    for (turn_id,) in op.get_bind().execute(_CANDIDATES, params).all():
        _withhold_turn(turn_id)


def _withhold_turn(turn_id: str) -> None:
    [(inputs, output, status, session_id)] = _all(
        "SELECT input_messages, output_message, status, session_id FROM turns WHERE turn_id = :t", t=turn_id
    )
    steps = _all("SELECT id, body FROM steps WHERE turn_id = :t ORDER BY id", t=turn_id)
    messages = _all("SELECT id, body FROM messages WHERE turn_id = :t ORDER BY id", t=turn_id)
    events = _all("SELECT seq, body FROM turn_events WHERE turn_id = :t ORDER BY seq", t=turn_id)
    stored = StoredTurn(inputs, output, status, [r[1] for r in steps], [r[1] for r in messages], [r[1] for r in events])
    change = withhold(stored)
    if change.inputs is not None:
        _write("UPDATE turns SET input_messages = :body WHERE turn_id = :t", [{"body": change.inputs, "t": turn_id}])
    if change.output is not None:
        _write("UPDATE turns SET output_message = :body WHERE turn_id = :t", [{"body": change.output, "t": turn_id}])
    _rewrite("steps", "id", steps, change.steps)
    _rewrite("messages", "id", messages, change.messages)
    _write(
        "INSERT INTO messages (session_id, turn_id, role, body) VALUES (:s, :t, 'assistant', :body)",
        [{"s": session_id, "t": turn_id, "body": body} for body in change.appended],
    )
    _write(
        "UPDATE turn_events SET body = :body WHERE turn_id = :t AND seq = :key",
        [{"body": body, "t": turn_id, "key": events[index][0]} for index, body in change.events.items()],
    )
    if change.input_blocked:
        _withhold_items(turn_id)


def _rewrite(table: str, key: str, rows: Sequence[tuple[Any, ...]], bodies: dict[int, str]) -> None:
    _write(
        f"UPDATE {table} SET body = :body WHERE {key} = :key",  # noqa: S608
        [{"body": body, "key": rows[index][0]} for index, body in bodies.items()],
    )


def _withhold_items(turn_id: str) -> None:
    """The input items of the response a blocked turn ran for, and their copies in its conversation."""
    for response_id, conversation_id in _all(
        "SELECT response_id, conversation_id FROM responses WHERE turn_id = :t", t=turn_id
    ):
        items = _all("SELECT item_id, body FROM items WHERE owner = :o", o=response_id)
        owners = [response_id, *([conversation_id] if conversation_id else [])]
        _write(
            "UPDATE items SET body = :body WHERE owner = :o AND item_id = :i",
            [{"body": withheld_item(body), "o": owner, "i": item_id} for owner in owners for item_id, body in items],
        )


def downgrade() -> None:
    """Nothing to undo: earlier versions read the placeholders as any text."""
