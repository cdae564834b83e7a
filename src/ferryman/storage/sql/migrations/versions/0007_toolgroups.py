"""Toolgroups registered at run time: the group as JSON under its caller-chosen id.

Revision ID: 0007_toolgroups
Revises: 0006_knowledge
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_toolgroups"
down_revision = "0006_knowledge"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # BIGSERIAL; SQLite's rowid
_STAMP = sa.DateTime(timezone=True).with_variant(sa.Text(), "sqlite")


def upgrade() -> None:
    """Create the table of toolgroup registrations."""
    op.create_table(
        "toolgroups",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("toolgroup_id", sa.Text(), nullable=False, unique=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", _STAMP, nullable=False),
    )


def downgrade() -> None:
    """Drop the table of toolgroup registrations."""
    op.drop_table("toolgroups")
