"""API keys (``ferryman keys``), stored by the SHA-256 of the key, never the key.

``attributes`` is JSON (roles, teams, projects, namespaces); times are epoch
seconds on SQLite; ``revoked_at`` is NULL while the key works.

Revision ID: 0004_api_keys
Revises: 0003_events_as_data
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_api_keys"
down_revision = "0003_events_as_data"
branch_labels = None
depends_on = None

_EPOCH = sa.DateTime(timezone=True).with_variant(sa.REAL(), "sqlite")


def upgrade() -> None:
    """Create the table of API keys."""
    op.create_table(
        "api_keys",
        sa.Column("key_hash", sa.Text(), primary_key=True),
        sa.Column("name", sa.Text(), nullable=False, unique=True),
        sa.Column("attributes", sa.Text(), nullable=False),
        sa.Column("created_at", _EPOCH, nullable=False),
        sa.Column("revoked_at", _EPOCH, nullable=True),
    )


def downgrade() -> None:
    """Drop the table of API keys."""
    op.drop_table("api_keys")
