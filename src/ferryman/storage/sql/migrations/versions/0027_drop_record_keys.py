"""The kernel's ``record_keys`` goes: idempotency keys live in ``idempotency_keys`` alone.

``record_keys`` was the kernel's idempotency table; the services never wrote to it, because every create stores
its key in ``idempotency_keys`` in the transaction that writes its record (with the claim token a lapsed call is
refused by). Two tables for one thing is one too many, so the unused one goes. No row is lost: nothing wrote it.

``downgrade`` creates it again, empty, as revision ``0011_kernel_tables`` made it.

Revision ID: 0027_drop_record_keys
Revises: 0026_turn_owners_in_turns
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027_drop_record_keys"
down_revision = "0026_turn_owners_in_turns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Drop ``record_keys`` and its index."""
    op.drop_index("ix_record_keys_expires_at", table_name="record_keys")
    op.drop_table("record_keys")


def downgrade() -> None:
    """Create ``record_keys`` again, empty."""
    op.create_table(
        "record_keys",
        sa.Column("owner_key", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.Text(), nullable=False),
        sa.Column("ref_kind", sa.Text(), nullable=True),
        sa.Column("ref_id", sa.Text(), nullable=True),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("owner_key", "key", name="pk_record_keys"),
    )
    op.create_index("ix_record_keys_expires_at", "record_keys", ["expires_at"])
