"""Owners of records: the principal (and its attributes) that created each record, for every kind.

Revision ID: 0005_owners
Revises: 0004_api_keys
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_owners"
down_revision = "0004_api_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the table of record owners."""
    op.create_table(
        "record_owners",
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("record_id", sa.Text(), nullable=False),
        sa.Column("principal", sa.Text(), nullable=False),
        sa.Column("owner", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "record_id"),
    )


def downgrade() -> None:
    """Drop the table of record owners."""
    op.drop_table("record_owners")
