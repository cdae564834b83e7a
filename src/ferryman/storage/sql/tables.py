"""The storage kernel's tables, as SQLAlchemy Core metadata (migration ``0011_kernel_tables`` creates them).

- ``records``: every record of every kind. ``seq`` is the creation order across kinds (never reused: SQLite's
  ``AUTOINCREMENT``, PostgreSQL's sequence). ``parent_seq`` points at the parent row, so deleting a record
  deletes its children, their logs and terms (``ON DELETE CASCADE``). ``k1``-``k3`` hold a kind's declared
  indexes as text; ``slot`` holds the parent's id while the record has one of its kind's exclusive statuses
  (NULL otherwise), so ``UNIQUE (kind, slot)`` lets a parent hold one such record at a time.
- ``record_terms``: a record's owner terms; a page filtered by owner is driven from its primary key.
- ``record_logs``: each record's append-only logs, entries numbered from 0 per channel.
"""

from __future__ import annotations

import sqlalchemy as sa

SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
"""A creation counter: PostgreSQL's ``bigint``; SQLite's ``INTEGER``, which makes it the rowid."""

metadata = sa.MetaData()

records = sa.Table(
    "records",
    metadata,
    sa.Column("seq", SEQ, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.Text(), nullable=False),
    sa.Column("id", sa.Text(), nullable=False),
    sa.Column("parent", sa.Text(), nullable=False),
    sa.Column("parent_seq", SEQ, sa.ForeignKey("records.seq", ondelete="CASCADE"), nullable=True),
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
    sa.Index("ix_records_kind_seq", "kind", "seq"),
    sa.Index("ix_records_children", "kind", "parent", "seq"),
    sa.Index("ix_records_parent_seq", "parent_seq"),
    sa.Index("ix_records_kind_at", "kind", "at"),  # pages bounded by time (audit, usage) read only that range
    sa.Index("ix_records_k1", "kind", "k1", "seq"),
    sa.Index("ix_records_k2", "kind", "k2", "seq"),
    sa.Index("ix_records_k3", "kind", "k3", "seq"),
    sa.Index(
        "ix_records_leases",
        "kind",
        "lease_until",
        sqlite_where=sa.text("lease_until IS NOT NULL"),
        postgresql_where=sa.text("lease_until IS NOT NULL"),
    ),
    sqlite_autoincrement=True,
)

record_terms = sa.Table(
    "record_terms",
    metadata,
    sa.Column("kind", sa.Text(), nullable=False),
    sa.Column("term", sa.Text(), nullable=False),
    sa.Column("seq", SEQ, sa.ForeignKey("records.seq", ondelete="CASCADE"), nullable=False),
    sa.PrimaryKeyConstraint("kind", "term", "seq", name="pk_record_terms"),
    sa.Index("ix_record_terms_seq", "seq", postgresql_using="hash"),  # see revision 0022
)

record_logs = sa.Table(
    "record_logs",
    metadata,
    sa.Column("rec_seq", SEQ, sa.ForeignKey("records.seq", ondelete="CASCADE"), nullable=False),
    sa.Column("channel", sa.Text(), nullable=False),
    sa.Column("n", sa.Integer(), nullable=False),
    sa.Column("body", sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint("rec_seq", "channel", "n", name="pk_record_logs"),
)

KERNEL_TABLES = (records, record_terms, record_logs)
"""The kernel's tables, parents first (the order to create them in)."""
