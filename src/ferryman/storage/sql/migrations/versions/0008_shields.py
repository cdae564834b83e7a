"""Shields registered at run time: the registration as JSON under its caller-chosen id.

Revision ID: 0008_shields
Revises: 0007_toolgroups
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_shields"
down_revision = "0007_toolgroups"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # BIGSERIAL; SQLite's rowid
_STAMP = sa.DateTime(timezone=True).with_variant(sa.Text(), "sqlite")


def upgrade() -> None:
    """Create the table of shield registrations."""
    op.create_table(
        "shields",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("shield_id", sa.Text(), nullable=False, unique=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", _STAMP, nullable=False),
    )


def downgrade() -> None:
    """Drop the table of shield registrations."""
    op.drop_table("shields")
