"""Chunks carry the store version that wrote them, and removals are kept, so in-process indexes catch up, not rebuild.

Every write of a store's chunks moves ``vector_stores.version`` first, stamps
the chunks it inserts with the new version (``chunks.version``) and records in
``chunk_removals`` each file whose chunks it deleted. An index that holds a
store as of a version reads only what changed after it
(``storage/sql/chunk_changes.py``). Removals are kept for a store's latest
versions only; ``removals_from`` is the oldest version whose removals are all
still kept, and an index behind it is sent the whole store. Existing chunks get
version 0 and existing stores ``removals_from`` 0: no index holds them yet.

On SQLite ``chunks`` is altered in place, never copied (as batch mode may do):
copying it would drop the triggers that keep its FTS5 table in step.

Revision ID: 0018_chunk_feed
Revises: 0017_vector_indexes
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_chunk_feed"
down_revision = "0017_vector_indexes"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # BIGSERIAL; SQLite's rowid


def upgrade() -> None:
    """Stamp chunks with versions (0 for those there), keep removals, and start every store's at 0."""
    op.add_column("chunks", sa.Column("version", sa.BigInteger(), nullable=False, server_default="0"))
    op.create_index("chunks_by_version", "chunks", ["vector_store_id", "version"])
    with op.batch_alter_table("vector_stores") as batch:
        batch.add_column(sa.Column("removals_from", sa.BigInteger(), nullable=False, server_default="0"))
    op.create_table(
        "chunk_removals",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column(
            "vector_store_id",
            sa.Text(),
            sa.ForeignKey("vector_stores.vector_store_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("file_id", sa.Text(), nullable=False),
        sa.Column("chunk_id", sa.Text(), nullable=True),
    )
    op.create_index("chunk_removals_by_version", "chunk_removals", ["vector_store_id", "version"])


def downgrade() -> None:
    """Drop the removals and the versions."""
    op.drop_table("chunk_removals")
    with op.batch_alter_table("vector_stores") as batch:
        batch.drop_column("removals_from")
    op.drop_index("chunks_by_version", "chunks")
    # SQLite (3.35 and later) drops a column in place; batch mode would copy the table, losing its triggers.
    op.execute("ALTER TABLE chunks DROP COLUMN version")
