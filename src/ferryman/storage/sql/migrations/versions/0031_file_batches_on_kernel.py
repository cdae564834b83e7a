"""File batches move into the kernel's ``records``; the ``file_batches`` table goes.

Each row of ``file_batches`` becomes one ``file_batch`` record under its vector store's record (kind
``vector_store``, the id of the row's ``vector_store_id``), with the batch's id, the ``FileBatchRecord``'s fields
as its body, no owner of its own (the one term of the server's records), created at the batch's own time, in the
rows' order of creation. A row whose store no record holds belongs to nothing the API can reach: it goes with the
table. The attachments keep their ``batch_id``.

``downgrade`` creates ``file_batches`` again as ``0006_knowledge`` made it and fills it from the records whose
store still has its row (the foreign key would refuse the others), then deletes the records and their terms.

Revision ID: 0031_file_batches_on_kernel
Revises: 0030_drop_conversation_anchors
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0031_file_batches_on_kernel"
down_revision = "0030_drop_conversation_anchors"
branch_labels = None
depends_on = None

# A revision keeps its own copy of the layouts it converts: the application's may change later.
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_FLAG = sa.Boolean().with_variant(sa.Integer(), "sqlite")
_KIND = "file_batch"
_STORE = "vector_store"
_UNOWNED = "-"
_INSERT_ROWS = 500

_records = sa.table(
    "records",
    sa.column("seq", _SEQ),
    sa.column("kind", sa.Text()),
    sa.column("id", sa.Text()),
    sa.column("parent", sa.Text()),
    sa.column("parent_seq", _SEQ),
    sa.column("body", sa.Text()),
    sa.column("at", sa.Float()),
)
_terms = sa.table("record_terms", sa.column("kind", sa.Text()), sa.column("term", sa.Text()), sa.column("seq", _SEQ))
_batches = sa.table(
    "file_batches",
    sa.column("batch_id", sa.Text()),
    sa.column("vector_store_id", sa.Text()),
    sa.column("created_at", sa.BigInteger()),
    sa.column("cancelled", _FLAG),
)
_stores = sa.table("vector_stores", sa.column("vector_store_id", sa.Text()))


def _body(batch_id: str, vector_store_id: str, created_at: int, cancelled: object) -> str:
    fields = {"batch_id": batch_id, "vector_store_id": vector_store_id, "created_at": int(created_at)}
    return json.dumps({**fields, "cancelled": bool(cancelled)})


def upgrade() -> None:
    """Copy every batch whose store has a record into ``records``, with its term, then drop ``file_batches``."""
    bind = op.get_bind()
    b = _batches.c
    store = _records.alias("store")
    found = bind.execute(
        sa.select(b.batch_id, b.vector_store_id, b.created_at, b.cancelled, store.c.seq)
        .join(store, sa.and_(store.c.kind == _STORE, store.c.id == b.vector_store_id))
        .order_by(b.created_at, b.batch_id)
    ).all()
    rows = [
        {"kind": _KIND, "id": batch_id, "parent": vs, "parent_seq": parent_seq, "at": float(created_at),
         "body": _body(batch_id, vs, created_at, cancelled)}
        for batch_id, vs, created_at, cancelled, parent_seq in found
    ]  # fmt: skip
    for start in range(0, len(rows), _INSERT_ROWS):
        bind.execute(sa.insert(_records), rows[start : start + _INSERT_ROWS])
    moved = sa.select(sa.literal(_KIND), sa.literal(_UNOWNED), _records.c.seq).where(_records.c.kind == _KIND)
    bind.execute(sa.insert(_terms).from_select(["kind", "term", "seq"], moved))
    op.drop_table("file_batches")
    if bind.dialect.name == "postgresql" and rows:
        op.execute("ANALYZE records, record_terms")


def downgrade() -> None:
    """Create ``file_batches`` again and fill it from the batch records; drop the records."""
    op.create_table(
        "file_batches",
        sa.Column("batch_id", sa.Text(), primary_key=True),
        sa.Column(
            "vector_store_id",
            sa.Text(),
            sa.ForeignKey("vector_stores.vector_store_id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("cancelled", _FLAG, nullable=False),
    )
    bind = op.get_bind()
    r = _records.c
    kept = sa.select(_stores.c.vector_store_id).where(_stores.c.vector_store_id == r.parent).exists()
    found = bind.execute(sa.select(r.body).where(r.kind == _KIND, kept).order_by(r.seq)).scalars().all()
    rows = []
    for body in found:
        batch = json.loads(body)
        rows.append({name: batch[name] for name in ("batch_id", "vector_store_id", "created_at", "cancelled")})
    for start in range(0, len(rows), _INSERT_ROWS):
        bind.execute(sa.insert(_batches), rows[start : start + _INSERT_ROWS])
    # Children first: SQLite enforces no ``ON DELETE CASCADE`` on a connection without its foreign keys pragma.
    bind.execute(sa.delete(_terms).where(_terms.c.kind == _KIND))
    bind.execute(sa.delete(_records).where(r.kind == _KIND))
