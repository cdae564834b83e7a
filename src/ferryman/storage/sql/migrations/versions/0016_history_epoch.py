"""Sessions count the changes to their history that are not appends, so that a replica reads only what was added.

A replica keeps each session's history (``storage/history_cache.py``). Completing the session's newest turn
appends to it; completing an older turn after a newer one, or deleting a turn, changes what came before, and
bumps ``history_epoch`` in the same transaction. Existing sessions start at 0, which no replica has kept yet.

Revision ID: 0016_history_epoch
Revises: 0015_agents_on_kernel
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_history_epoch"
down_revision = "0015_agents_on_kernel"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Give every session a history epoch of 0."""
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("history_epoch", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    """Drop the sessions' history epochs."""
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("history_epoch")
