"""Conversations move into the kernel's ``records``; ``conversations`` keeps the anchor a response's start holds.

Each row of ``conversations`` becomes one ``conversation`` record, in creation order (the row's ``id``), created
at the row's ``created_at``, its body the row's columns (``ConversationRecord``: ``metadata`` as its value). Its
owner, from ``record_owners``, is stored with it (and its owner terms in ``record_terms``); those owner rows go.
The row stays, under the same id, with its session (whose deletion deletes it): a response's start and finish
hold it while they add items, so that a deletion beside them waits. ``metadata`` and ``created_at`` go.

On SQLite the columns are dropped in place (SQLite 3.35 and later), as ``0021_vector_stores_on_kernel`` drops
its own, not by copying the table as batch mode does: no foreign key names ``conversations`` today (items and
responses keep its id as text), but a copy would rewrite every row to drop two columns. PostgreSQL then analyzes
the kernel's tables, whose statistics a bulk copy leaves stale.

``downgrade`` adds the columns back (as ``0001_baseline`` made them), fills them from the records, and puts the
owners back into ``record_owners``. SQLite cannot drop a column's default in place, so there the restored columns
keep the default they were added with (every write of that version sets them).

Revision ID: 0023_conversations_on_kernel
Revises: 0022_record_terms_hash
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import sqlalchemy as sa
from alembic import op

from ferryman.errors import ConfigurationError
from ferryman.storage.kernel.model import Owner, owner_terms

revision = "0023_conversations_on_kernel"
down_revision = "0022_record_terms_hash"
branch_labels = None
depends_on = None

# A revision keeps its own copy of the layouts it converts: the application's may change later.
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_KIND = "conversation"
_PREFIXES = {"api_key": "key:", "subject": "sub:"}
_DEFAULTS = {"metadata": "{}", "created_at": "0"}
"""What a restored column holds while it is added, before the records fill it."""

_records = sa.table(
    "records",
    sa.column("seq", _SEQ),
    sa.column("kind", sa.Text()),
    sa.column("id", sa.Text()),
    sa.column("parent", sa.Text()),
    sa.column("owner_key", sa.Text()),
    sa.column("owner", sa.Text()),
    sa.column("body", sa.Text()),
    sa.column("at", sa.Float()),
)
_terms = sa.table("record_terms", sa.column("kind", sa.Text()), sa.column("term", sa.Text()), sa.column("seq", _SEQ))
_owners = sa.table(
    "record_owners",
    sa.column("kind", sa.Text()),
    sa.column("record_id", sa.Text()),
    sa.column("principal", sa.Text()),
    sa.column("owner", sa.Text()),
)
_conversations = sa.table(
    "conversations",
    sa.column("id", _SEQ),
    sa.column("conversation_id", sa.Text()),
    sa.column("session_id", sa.Text()),
    sa.column("metadata", sa.Text()),
    sa.column("created_at", sa.BigInteger()),
)


def _dump(value: Any) -> str:
    """JSON as the kernel stores it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# -- up ------------------------------------------------------------------------------------------------------------


def _owners_of() -> dict[str, Owner]:
    """The conversations' owners in ``record_owners``, by conversation id."""
    query = sa.select(_owners.c.record_id, _owners.c.owner).where(_owners.c.kind == _KIND)
    return {record_id: Owner.from_json(json.loads(owner)) for record_id, owner in op.get_bind().execute(query)}


def _put(row: sa.RowMapping, owner: Owner | None) -> None:
    """Insert one conversation's record and its owner terms, as ``Records.put`` writes them."""
    bind = op.get_bind()
    body = {**row, "metadata": json.loads(row["metadata"])}  # ``ConversationRecord``'s fields, in its order
    values = {
        "kind": _KIND,
        "id": row["conversation_id"],
        "parent": "",
        "owner_key": None if owner is None else owner.key,
        "owner": None if owner is None else _dump(owner.to_json()),
        "body": _dump(body),
        "at": float(row["created_at"]),
    }
    # One row at a time: the sequence must number them in this order, which a multi-row insert leaves open.
    seq = bind.execute(sa.insert(_records).values(values).returning(_records.c.seq)).scalar_one()
    terms = [{"kind": _KIND, "term": term, "seq": seq} for term in sorted(owner_terms(owner))]
    bind.execute(sa.insert(_terms), terms)


def _check_sqlite() -> None:
    """Refuse, before changing anything, a SQLite too old to drop a column in place."""
    if op.get_bind().dialect.name == "sqlite" and sqlite3.sqlite_version_info < (3, 35):
        raise ConfigurationError(
            f"SQLite {sqlite3.sqlite_version} cannot drop a column in place; ferryman's schema needs 3.35 or later"
        )


def upgrade() -> None:
    """Copy every conversation into ``records`` with its owner, then drop its moved columns and owner rows."""
    _check_sqlite()
    bind = op.get_bind()
    owners = _owners_of()
    c = _conversations.c
    query = sa.select(c.conversation_id, c.session_id, c.metadata, c.created_at).order_by(c.id)
    for row in bind.execute(query).mappings().all():
        _put(row, owners.get(row["conversation_id"]))
    # Owners of conversations deleted earlier (if any remain) go too: they belong to nothing.
    bind.execute(sa.delete(_owners).where(_owners.c.kind == _KIND))
    for name in _DEFAULTS:
        op.execute(f"ALTER TABLE conversations DROP COLUMN {name}")
    if bind.dialect.name == "postgresql":
        op.execute("ANALYZE records, record_terms")


# -- down ----------------------------------------------------------------------------------------------------------


def _old_owner(record_id: str, stored: str) -> dict[str, Any]:
    """The ``record_owners`` row of an owner as the record stores it (``Owner.to_json``)."""
    owner = Owner.from_json(json.loads(stored))
    typed = {"kind": owner.kind, "id": owner.id, "attributes": {k: list(v) for k, v in owner.attributes.items()}}
    principal = _PREFIXES[owner.kind] + owner.id
    return {"kind": _KIND, "record_id": record_id, "principal": principal, "owner": json.dumps(typed)}


def downgrade() -> None:
    """Put the columns back into ``conversations`` and the owners into ``record_owners``; drop the records."""
    for column in (sa.Column("metadata", sa.Text()), sa.Column("created_at", sa.BigInteger())):
        column.nullable = False
        column.server_default = sa.DefaultClause(_DEFAULTS[column.name])
        op.add_column("conversations", column)
    bind = op.get_bind()
    query = sa.select(_records.c.id, _records.c.body, _records.c.owner).where(_records.c.kind == _KIND)
    for record_id, body, owner in bind.execute(query.order_by(_records.c.seq)).all():
        conversation = json.loads(body)
        update = sa.update(_conversations).where(_conversations.c.conversation_id == record_id)
        bind.execute(
            update.values(metadata=json.dumps(conversation["metadata"]), created_at=conversation["created_at"])
        )
        if owner is not None:
            bind.execute(sa.insert(_owners).values(_old_owner(record_id, owner)))
    if bind.dialect.name == "postgresql":
        for name in _DEFAULTS:
            op.alter_column("conversations", name, server_default=None)
    # Children first: SQLite enforces no ``ON DELETE CASCADE`` on a connection without its foreign keys pragma.
    bind.execute(sa.delete(_terms).where(_terms.c.kind == _KIND))
    bind.execute(sa.delete(_records).where(_records.c.kind == _KIND))
