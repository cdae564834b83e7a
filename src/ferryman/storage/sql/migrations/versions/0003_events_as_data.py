"""Stored stream events become their JSON data: the SSE framing moves to the HTTP edge.

Earlier versions stored whole frames, ``"id: N\\ndata: {json}\\n\\n"`` (turn
events) and ``"id: N\\nevent: TYPE\\ndata: {json}\\n\\n"`` (response events);
only the data is kept. A row already holding data is left alone.

Revision ID: 0003_events_as_data
Revises: 0002_idempotency_keys
"""

from __future__ import annotations

import json
from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision = "0003_events_as_data"
down_revision = "0002_idempotency_keys"
branch_labels = None
depends_on = None

_TABLES = (("turn_events", "turn_id"), ("response_events", "response_id"))
_BATCH = 1000
_FRAMED = "(body LIKE 'id:%' OR body LIKE 'event:%' OR body LIKE 'data:%')"


def frame_data(frame: str) -> str:
    """The data of an SSE frame: its ``data:`` lines, joined by newlines (the SSE rule)."""
    lines = [line[5:].removeprefix(" ") for line in frame.split("\n") if line.startswith("data:")]
    return "\n".join(lines)


def _rewrite(table: str, key: str, convert: str, rewrite: Callable[[str, int, str], str]) -> None:
    bind = op.get_bind()
    select = sa.text(f"SELECT {key}, seq, body FROM {table} WHERE {convert} LIMIT {_BATCH}")  # noqa: S608
    update = sa.text(f"UPDATE {table} SET body = :body WHERE {key} = :key AND seq = :seq")  # noqa: S608
    while True:
        found = bind.execute(select).all()
        if not found:
            return
        changes = [{"key": row[0], "seq": row[1], "body": rewrite(table, row[1], row[2])} for row in found]
        bind.execute(update, changes)


def upgrade() -> None:
    """Keep the data of every stored frame (each converted row stops matching, so the batches end)."""
    for table, key in _TABLES:
        _rewrite(table, key, _FRAMED, lambda _table, _seq, body: frame_data(body))


def _frame(table: str, seq: int, body: str) -> str:
    if table == "response_events":
        return f"id: {seq}\nevent: {json.loads(body)['type']}\ndata: {body}\n\n"
    return f"id: {seq}\ndata: {body}\n\n"


def downgrade() -> None:
    """Frame the data again, as earlier versions stored it."""
    for table, key in _TABLES:
        _rewrite(table, key, f"NOT {_FRAMED}", _frame)
