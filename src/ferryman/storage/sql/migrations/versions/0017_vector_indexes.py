"""Approximate vector search on PostgreSQL: an HNSW index per embedding dimension (nothing on SQLite).

``chunks.embedding`` is an untyped ``vector``, so each dimension gets a partial
index over a cast of the column to its type (``halfvec`` from 2,001 to 4,000
dimensions, none above), named ``chunks_embedding_<dimension>``; the query that
uses them is in ``storage/sql/vectors.py``, which also makes the index of a new
dimension when a store of it is created. Made here: the dimensions of the
stores there are, and the default embedding model's 384.

Building an index reads every chunk of its dimension into
``maintenance_work_mem``; a graph larger than that is built far more slowly
(PostgreSQL says so in a notice), so raise it before migrating a large table:
100k chunks of 384 dimensions made a 195 MB index in about 4 minutes on 2
busy cores with 1 GB, 300k a 586 MB one in 8 with 2 GB.

Revision ID: 0017_vector_indexes
Revises: 0016_history_epoch
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_vector_indexes"
down_revision = "0016_history_epoch"
branch_labels = None
depends_on = None

DEFAULT_DIMENSION = 384  # all-MiniLM-L6-v2, the embedded model
_LIMITS = {"vector": 2_000, "halfvec": 4_000}


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def upgrade() -> None:
    """Create the HNSW index of each stored dimension and of 384 (PostgreSQL only)."""
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        return
    found = bind.execute(
        sa.text(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'vector'"
        )
    )
    schema = _quoted(found.scalar_one())
    stored = bind.execute(sa.text("SELECT DISTINCT embedding_dimension FROM vector_stores")).scalars()
    for dimension in sorted({DEFAULT_DIMENSION, *stored}):
        kind = next((kind for kind, most in _LIMITS.items() if 0 < dimension <= most), None)
        if kind is not None:
            op.execute(
                f"CREATE INDEX IF NOT EXISTS chunks_embedding_{int(dimension)} ON chunks USING hnsw "
                f"((embedding::{schema}.{kind}({int(dimension)})) {schema}.{kind}_cosine_ops) "
                f"WHERE {schema}.vector_dims(embedding) = {int(dimension)}"
            )


def downgrade() -> None:
    """Drop every dimension's HNSW index, those made since the upgrade too (PostgreSQL only)."""
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        return
    names = bind.execute(
        sa.text(
            "SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "WHERE x.indrelid = 'chunks'::regclass AND i.relname ~ '^chunks_embedding_[0-9]+$'"
        )
    ).scalars()
    for name in list(names):
        op.execute(f"DROP INDEX {name}")
