"""On PostgreSQL, ``record_terms``'s index on ``seq`` becomes a hash index (SQLite: unchanged).

The index serves the cascade from a deleted record to its terms, which looks rows up by ``seq`` alone. As a
btree it also hands the planner the terms of every owner in creation order, and a plan made once for any
owner's term (the generic plan of a prepared statement) then reads that index backwards, keeping one owner's
rows among everyone's: a caller's page cost what every other caller owned. A hash index looks rows up as well
and orders nothing, so a term's rows come in order from the primary key (kind, term, seq) alone.

Revision ID: 0022_record_terms_hash
Revises: 0021_vector_stores_on_kernel
"""

from __future__ import annotations

from alembic import op

revision = "0022_record_terms_hash"
down_revision = "0021_vector_stores_on_kernel"
branch_labels = None
depends_on = None

_INDEX = "ix_record_terms_seq"


def upgrade() -> None:
    """Replace the btree on ``record_terms.seq`` by a hash index, on PostgreSQL."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index(_INDEX, table_name="record_terms")
    op.create_index(_INDEX, "record_terms", ["seq"], postgresql_using="hash")


def downgrade() -> None:
    """Put the btree back, on PostgreSQL."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index(_INDEX, table_name="record_terms")
    op.create_index(_INDEX, "record_terms", ["seq"])
