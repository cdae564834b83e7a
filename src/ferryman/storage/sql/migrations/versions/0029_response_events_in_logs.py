"""A response's stored events move into its record's ``events`` log; the ``response_events`` table goes.

Each row of ``response_events`` becomes one entry of the ``events`` log (``record_logs``) of the ``response``
record with its response's id, its number the row's ``seq``, its body the row's (the event's JSON data). A row
whose response no record holds belongs to nothing the API can reach: it goes with the table.

``downgrade`` creates ``response_events`` again as revision ``0001_baseline`` made it (its rows deleted with their
response's row) and fills it from the logs of the responses whose row is there, then deletes those logs.

Revision ID: 0029_response_events_in_logs
Revises: 0028_items_on_kernel
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029_response_events_in_logs"
down_revision = "0028_items_on_kernel"
branch_labels = None
depends_on = None

# A revision keeps its own copy of the layouts it converts: the application's may change later.
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_KIND = "response"
_CHANNEL = "events"

_records = sa.table("records", sa.column("seq", _SEQ), sa.column("kind", sa.Text()), sa.column("id", sa.Text()))
_logs = sa.table(
    "record_logs",
    sa.column("rec_seq", _SEQ),
    sa.column("channel", sa.Text()),
    sa.column("n", sa.Integer()),
    sa.column("body", sa.Text()),
)
_events = sa.table(
    "response_events", sa.column("response_id", sa.Text()), sa.column("seq", sa.Integer()), sa.column("body")
)
_responses = sa.table("responses", sa.column("response_id", sa.Text()))


def upgrade() -> None:
    """Copy every response's events into its record's log, then drop ``response_events``."""
    e, r = _events.c, _records.c
    entries = (
        sa.select(r.seq, sa.literal(_CHANNEL), e.seq, e.body)
        .select_from(_events)
        .join(_records, sa.and_(r.kind == _KIND, r.id == e.response_id))
    )
    op.get_bind().execute(sa.insert(_logs).from_select(["rec_seq", "channel", "n", "body"], entries))
    op.drop_table("response_events")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ANALYZE record_logs")


def downgrade() -> None:
    """Create ``response_events`` again and fill it from the responses' logs; drop those logs."""
    op.create_table(
        "response_events",
        sa.Column("response_id", sa.Text(), sa.ForeignKey("responses.response_id", ondelete="CASCADE"), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("response_id", "seq"),
    )
    logs, r = _logs.c, _records.c
    held = sa.and_(logs.channel == _CHANNEL, logs.rec_seq.in_(sa.select(r.seq).where(r.kind == _KIND)))
    entries = (
        sa.select(r.id, logs.n, logs.body)
        .select_from(_logs)
        .join(_records, r.seq == logs.rec_seq)
        .where(held, r.id.in_(sa.select(_responses.c.response_id)))
    )
    bind = op.get_bind()
    bind.execute(sa.insert(_events).from_select(["response_id", "seq", "body"], entries))
    bind.execute(sa.delete(_logs).where(held))
