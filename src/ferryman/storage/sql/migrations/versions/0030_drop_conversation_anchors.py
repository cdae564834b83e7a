"""Conversations' anchors go: a conversation is its kernel record alone.

Since ``0023_conversations_on_kernel`` the ``conversations`` table kept each conversation's id and session id
beside its record, for a response's start to hold (``FOR KEY SHARE``) and its session's delete to cascade to. The
start holds the record's row now, and the record holds the session id, so the table goes. No row is lost: each
one's columns are in its record.

``downgrade`` creates the table again as ``0023_conversations_on_kernel`` left it and fills it from the records,
in their order (a conversation whose session row is gone, or a record without a session, has none: the foreign
key would refuse it).

Revision ID: 0030_drop_conversation_anchors
Revises: 0029_response_events_in_logs
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0030_drop_conversation_anchors"
down_revision = "0029_response_events_in_logs"
branch_labels = None
depends_on = None

# A revision keeps its own copy of the layouts it converts: the application's may change later.
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_records = sa.table(
    "records", sa.column("seq", _SEQ), sa.column("kind", sa.Text()), sa.column("id", sa.Text()), sa.column("body")
)
_sessions = sa.table("sessions", sa.column("session_id", sa.Text()))
_conversations = sa.table("conversations", sa.column("conversation_id", sa.Text()), sa.column("session_id"))


def upgrade() -> None:
    """Drop ``conversations``."""
    op.drop_table("conversations")


def downgrade() -> None:
    """Create ``conversations`` again and fill it from the conversations' records."""
    op.create_table(
        "conversations",
        sa.Column("id", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("conversation_id", sa.Text(), nullable=False, unique=True),
        sa.Column("session_id", sa.Text(), sa.ForeignKey("sessions.session_id", ondelete="CASCADE"), nullable=False),
    )
    bind = op.get_bind()
    sessions = {row[0] for row in bind.execute(sa.select(_sessions.c.session_id))}
    r = _records.c
    query = sa.select(r.id, r.body).where(r.kind == "conversation").order_by(r.seq)
    for conversation_id, body in bind.execute(query).all():
        session_id = json.loads(body).get("session_id")
        if session_id in sessions:
            bind.execute(sa.insert(_conversations).values(conversation_id=conversation_id, session_id=session_id))
