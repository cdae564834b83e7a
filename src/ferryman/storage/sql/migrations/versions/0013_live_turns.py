"""Queued turns are indexed with running ones: the lease sweep and a session's queue read only those.

A turn may now wait ``queued`` (double-texting): it holds a lease like a running turn, so the sweep looks at
both statuses, and a session's queue (its running and queued turns, in order) is read at every step of the
queue. ``live_turn_leases`` replaces ``running_turn_leases`` (which covered running turns only); ``live_turns``
holds each session's running and queued turns in start order.

Revision ID: 0013_live_turns
Revises: 0012_registries
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_live_turns"
down_revision = "0012_registries"
branch_labels = None
depends_on = None

_LIVE = sa.text("status IN ('in_progress', 'queued')")
_RUNNING = sa.text("status = 'in_progress'")


def upgrade() -> None:
    """Index the running and queued turns by lease end, and by session in start order."""
    op.create_index("live_turn_leases", "turns", ["lease_until"], sqlite_where=_LIVE, postgresql_where=_LIVE)
    op.create_index("live_turns", "turns", ["session_id", "id"], sqlite_where=_LIVE, postgresql_where=_LIVE)
    op.drop_index("running_turn_leases", table_name="turns")


def downgrade() -> None:
    """Index the running turns alone by lease end again."""
    op.create_index("running_turn_leases", "turns", ["lease_until"], sqlite_where=_RUNNING, postgresql_where=_RUNNING)
    op.drop_index("live_turns", table_name="turns")
    op.drop_index("live_turn_leases", table_name="turns")
