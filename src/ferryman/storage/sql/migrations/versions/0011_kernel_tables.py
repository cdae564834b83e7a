"""The storage kernel's tables: records of every kind, their owner terms, logs, and idempotency keys.

Additive: nothing is moved into them yet (later revisions move each kind's rows). ``tables.py`` describes the
same tables; a test compares the two. A revision keeps its own copy: the application's tables may change later.

Revision ID: 0011_kernel_tables
Revises: 0010_typed_principals
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_kernel_tables"
down_revision = "0010_typed_principals"
branch_labels = None
depends_on = None

_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # PostgreSQL's bigint; SQLite's rowid
_LEASED = sa.text("lease_until IS NOT NULL")


def upgrade() -> None:
    """Create ``records``, ``record_terms``, ``record_logs`` and ``record_keys`` with their indexes."""
    op.create_table(
        "records",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("parent", sa.Text(), nullable=False),
        sa.Column("parent_seq", _SEQ, sa.ForeignKey("records.seq", ondelete="CASCADE"), nullable=True),
        sa.Column("owner_key", sa.Text(), nullable=True),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=True),
        sa.Column("lease_until", sa.Float(), nullable=True),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("k1", sa.Text(), nullable=True),
        sa.Column("k2", sa.Text(), nullable=True),
        sa.Column("k3", sa.Text(), nullable=True),
        sa.Column("slot", sa.Text(), nullable=True),
        sa.UniqueConstraint("kind", "id", name="uq_records_kind_id"),
        sa.UniqueConstraint("kind", "slot", name="uq_records_kind_slot"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_records_kind_seq", "records", ["kind", "seq"])
    op.create_index("ix_records_children", "records", ["kind", "parent", "seq"])
    op.create_index("ix_records_parent_seq", "records", ["parent_seq"])
    op.create_index("ix_records_kind_at", "records", ["kind", "at"])
    for n in (1, 2, 3):
        op.create_index(f"ix_records_k{n}", "records", ["kind", f"k{n}", "seq"])
    op.create_index(
        "ix_records_leases", "records", ["kind", "lease_until"], sqlite_where=_LEASED, postgresql_where=_LEASED
    )
    op.create_table(
        "record_terms",
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("term", sa.Text(), nullable=False),
        sa.Column("seq", _SEQ, sa.ForeignKey("records.seq", ondelete="CASCADE"), nullable=False),
        sa.PrimaryKeyConstraint("kind", "term", "seq", name="pk_record_terms"),
    )
    op.create_index("ix_record_terms_seq", "record_terms", ["seq"])
    op.create_table(
        "record_logs",
        sa.Column("rec_seq", _SEQ, sa.ForeignKey("records.seq", ondelete="CASCADE"), nullable=False),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("rec_seq", "channel", "n", name="pk_record_logs"),
    )
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


def downgrade() -> None:
    """Drop the kernel's tables (children first)."""
    op.drop_table("record_keys")
    op.drop_table("record_logs")
    op.drop_table("record_terms")
    op.drop_table("records")
