"""Baseline: the schema the home-made runner had built (SQLite 0001-0005, PostgreSQL 0001-0003).

Types differ per dialect exactly as they did: SQLite keeps times as ISO text
(leases as epoch seconds) and flags as integers.

Revision ID: 0001_baseline
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_baseline"
down_revision = None
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # BIGSERIAL; SQLite's rowid
_STAMP = sa.DateTime(timezone=True).with_variant(sa.Text(), "sqlite")
_EPOCH = sa.DateTime(timezone=True).with_variant(sa.REAL(), "sqlite")
_FLAG = sa.Boolean().with_variant(sa.Integer(), "sqlite")
_RUNNING = sa.text("status = 'in_progress'")


def _id() -> sa.Column[int]:
    return sa.Column("id", _ID, primary_key=True, autoincrement=True)


def _text(name: str, nullable: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.Text(), nullable=nullable)


def _ref(name: str, target: str, nullable: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.Text(), sa.ForeignKey(target, ondelete="CASCADE"), nullable=nullable)


def upgrade() -> None:
    """Create every table of the baseline."""
    op.create_table(
        "agents",
        _id(),
        sa.Column("agent_id", sa.Text(), nullable=False, unique=True),
        _text("config"),
        sa.Column("created_at", _STAMP, nullable=False),
    )
    op.create_table(
        "sessions",
        _id(),
        sa.Column("session_id", sa.Text(), nullable=False, unique=True),
        _ref("agent_id", "agents.agent_id", nullable=True),
        _text("session_name"),
        sa.Column("started_at", _STAMP, nullable=False),
    )
    op.create_index("sessions_of_agent", "sessions", ["agent_id", "id"])
    op.create_table(
        "turns",
        _id(),
        sa.Column("turn_id", sa.Text(), nullable=False, unique=True),
        _ref("session_id", "sessions.session_id"),
        _text("agent_id", nullable=True),
        _text("status"),
        _text("input_messages"),
        _text("output_message", nullable=True),
        _text("overrides"),
        sa.Column("infer_iters", sa.Integer(), nullable=False, server_default="0"),
        _text("error_code", nullable=True),
        _text("error_message", nullable=True),
        sa.Column("started_at", _STAMP, nullable=False),
        sa.Column("completed_at", _STAMP, nullable=True),
        sa.Column("lease_until", _EPOCH, nullable=True),
    )
    op.create_index("turns_of_session", "turns", ["session_id", "id"])
    # At most one running turn per session, enforced by the database itself (across replicas).
    op.create_index(
        "one_running_turn", "turns", ["session_id"], unique=True, sqlite_where=_RUNNING, postgresql_where=_RUNNING
    )
    op.create_index("running_turn_leases", "turns", ["lease_until"], sqlite_where=_RUNNING, postgresql_where=_RUNNING)
    op.create_table(
        "steps",
        _id(),
        sa.Column("step_id", sa.Text(), nullable=False, unique=True),
        _ref("turn_id", "turns.turn_id"),
        _text("step_type"),
        sa.Column("pending", _FLAG, nullable=False, server_default=sa.false()),
        _text("body"),
    )
    op.create_index("steps_of_turn", "steps", ["turn_id", "id"])
    op.create_table(
        "messages",
        _id(),
        _ref("session_id", "sessions.session_id"),
        _ref("turn_id", "turns.turn_id"),
        _text("role"),
        _text("body"),
    )
    op.create_index("messages_of_session", "messages", ["session_id", "id"])
    op.create_index("messages_of_turn", "messages", ["turn_id"])
    _responses()


def _responses() -> None:
    op.create_table(
        "models",
        _id(),
        sa.Column("model_id", sa.Text(), nullable=False, unique=True),
        _text("provider_id"),
        _text("provider_resource_id"),
        _text("model_type"),
        _text("metadata"),
        sa.Column("created_at", _STAMP, nullable=False),
    )
    op.create_table(
        "conversations",
        _id(),
        sa.Column("conversation_id", sa.Text(), nullable=False, unique=True),
        _ref("session_id", "sessions.session_id"),
        _text("metadata"),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "responses",
        _id(),
        sa.Column("response_id", sa.Text(), nullable=False, unique=True),
        _ref("turn_id", "turns.turn_id"),
        _text("session_id"),
        _text("conversation_id", nullable=True),
        _text("previous_response_id", nullable=True),
        _text("status"),
        sa.Column("background", _FLAG, nullable=False, server_default=sa.false()),
        _text("body"),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("responses_by_previous", "responses", ["previous_response_id"])
    # Stream events, numbered for replay (Last-Event-ID, starting_after).
    op.create_table(
        "response_events",
        _ref("response_id", "responses.response_id"),
        sa.Column("seq", sa.Integer(), nullable=False),
        _text("body"),
        sa.PrimaryKeyConstraint("response_id", "seq"),
    )
    op.create_table(
        "turn_events",
        _ref("turn_id", "turns.turn_id"),
        sa.Column("seq", sa.Integer(), nullable=False),
        _text("body"),
        sa.PrimaryKeyConstraint("turn_id", "seq"),
    )
    # Items in OpenAI form: a conversation's items, or a response's input items (owner = its id).
    op.create_table(
        "items", _id(), _text("item_id"), _text("owner"), _text("body"), sa.UniqueConstraint("owner", "item_id")
    )
    op.create_index("items_of_owner", "items", ["owner", "id"])


def downgrade() -> None:
    """Drop every table of the baseline."""
    for table in (
        "items",
        "turn_events",
        "response_events",
        "responses",
        "conversations",
        "models",
        "messages",
        "steps",
        "turns",
        "sessions",
        "agents",
    ):
        op.drop_table(table)
