"""Idempotency keys of requests, per owner (the caller; '' until auth exists).

Times are epoch seconds on SQLite; ``result`` is NULL while the first call runs.

Revision ID: 0002_idempotency_keys
Revises: 0001_baseline
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_idempotency_keys"
down_revision = "0001_baseline"
branch_labels = None
depends_on = None

_EPOCH = sa.DateTime(timezone=True).with_variant(sa.REAL(), "sqlite")


def upgrade() -> None:
    """Create the table of idempotency keys."""
    op.create_table(
        "idempotency_keys",
        sa.Column("owner", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=False),
        sa.Column("token", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("created_at", _EPOCH, nullable=False),
        sa.Column("expires_at", _EPOCH, nullable=False),
        sa.PrimaryKeyConstraint("owner", "idempotency_key"),
    )
    op.create_index("idempotency_keys_expiry", "idempotency_keys", ["expires_at"])


def downgrade() -> None:
    """Drop the table of idempotency keys."""
    op.drop_table("idempotency_keys")
