"""Vector stores' settings move into the kernel's ``records``; ``vector_stores`` keeps the chunk index's anchor.

Each row of ``vector_stores`` becomes one ``vector_store`` record, in the order stores were listed
(``created_at``, then ``vector_store_id``), created at the row's ``created_at``, its body the row's settings
(``VectorStoreRecord``: JSON columns as their values). Its owner, from ``record_owners``, is stored with it (and
its owner terms in ``record_terms``); those owner rows go. The row stays, under the same id, with what the chunk
index keeps of the store (``embedding_dimension``, ``version``, ``removals_from``): attachments, batches, chunks
and removals name it with cascading foreign keys. Its settings' columns and their index go.

On SQLite the columns are dropped in place (SQLite 3.35 and later), never by copying the table as batch mode
does: dropping the old table would cascade to every attachment and chunk wherever foreign keys are enforced.
PostgreSQL then analyzes the kernel's tables, whose statistics a bulk copy leaves stale.

``downgrade`` adds the columns back (as ``0006_knowledge`` made them), fills them from the records, and puts
the owners back into ``record_owners``. SQLite cannot drop a column's default in place, so there its restored
``NOT NULL`` columns keep the default they were added with (every write of that version sets them).

Revision ID: 0021_vector_stores_on_kernel
Revises: 0020_files_on_kernel
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import sqlalchemy as sa
from alembic import op

from ferryman.errors import ConfigurationError
from ferryman.storage.kernel.model import Owner, owner_terms

revision = "0021_vector_stores_on_kernel"
down_revision = "0020_files_on_kernel"
branch_labels = None
depends_on = None

# A revision keeps its own copy of the layouts it converts: the application's may change later.
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_KIND = "vector_store"
_PREFIXES = {"api_key": "key:", "subject": "sub:"}
_INDEX = "vector_stores_by_creation"
_JSON = ("metadata", "chunking_strategy", "expires_after")
"""The settings stored as JSON text."""

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


def _settings() -> list[sa.Column[Any]]:
    """The settings' columns as ``0006_knowledge`` made them, in the record's order, without defaults."""
    return [
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("embedding_model", sa.Text(), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("chunking_strategy", sa.Text(), nullable=False),
        sa.Column("expires_after", sa.Text(), nullable=True),
        sa.Column("last_active_at", sa.BigInteger(), nullable=False),
        sa.Column("provider_id", sa.Text(), nullable=True),
        sa.Column("provider_vector_db_id", sa.Text(), nullable=True),
    ]


_DEFAULTS = {
    "name": "",
    "created_at": "0",
    "embedding_model": "",
    "metadata": "{}",
    "chunking_strategy": "{}",
    "last_active_at": "0",
}
"""What a restored ``NOT NULL`` column holds while it is added, before the records fill it."""

_stores = sa.table(
    "vector_stores",
    sa.column("vector_store_id", sa.Text()),
    sa.column("embedding_dimension", sa.Integer()),
    *(sa.column(column.name, column.type) for column in _settings()),
)


def _dump(value: Any) -> str:
    """JSON as the kernel stores it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# -- up ------------------------------------------------------------------------------------------------------------


def _owners_of() -> dict[str, Owner]:
    """The stores' owners in ``record_owners``, by store id."""
    query = sa.select(_owners.c.record_id, _owners.c.owner).where(_owners.c.kind == _KIND)
    return {record_id: Owner.from_json(json.loads(owner)) for record_id, owner in op.get_bind().execute(query)}


def _body(row: sa.RowMapping) -> dict[str, Any]:
    """A store's record body (``VectorStoreRecord``'s fields, in its order) from its row."""
    loaded = {name: None if row[name] is None else json.loads(row[name]) for name in _JSON}
    return {
        "vector_store_id": row["vector_store_id"],
        "name": row["name"],
        "created_at": row["created_at"],
        "embedding_model": row["embedding_model"],
        "embedding_dimension": row["embedding_dimension"],
        **loaded,
        "last_active_at": row["last_active_at"],
        "provider_id": row["provider_id"],
        "provider_vector_db_id": row["provider_vector_db_id"],
    }


def _put(store: dict[str, Any], owner: Owner | None) -> None:
    """Insert one store's record and its owner terms, as ``Records.put`` writes them."""
    bind = op.get_bind()
    values = {
        "kind": _KIND,
        "id": store["vector_store_id"],
        "parent": "",
        "owner_key": None if owner is None else owner.key,
        "owner": None if owner is None else _dump(owner.to_json()),
        "body": _dump(store),
        "at": float(store["created_at"]),
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
    """Copy every store's settings into ``records`` with its owner, then drop their columns and owner rows."""
    _check_sqlite()
    bind = op.get_bind()
    owners = _owners_of()
    query = sa.select(*_stores.c).order_by(_stores.c.created_at, _stores.c.vector_store_id)
    for row in bind.execute(query).mappings().all():
        _put(_body(row), owners.get(row["vector_store_id"]))
    # Owners of stores deleted earlier (if any remain) go too: they belong to nothing.
    bind.execute(sa.delete(_owners).where(_owners.c.kind == _KIND))
    op.drop_index(_INDEX, "vector_stores")  # SQLite drops no column an index names
    for column in _settings():
        op.execute(f"ALTER TABLE vector_stores DROP COLUMN {column.name}")
    if bind.dialect.name == "postgresql":
        op.execute("ANALYZE records, record_terms")


# -- down ----------------------------------------------------------------------------------------------------------


def _old_owner(record_id: str, stored: str) -> dict[str, Any]:
    """The ``record_owners`` row of an owner as the record stores it (``Owner.to_json``)."""
    owner = Owner.from_json(json.loads(stored))
    typed = {"kind": owner.kind, "id": owner.id, "attributes": {k: list(v) for k, v in owner.attributes.items()}}
    principal = _PREFIXES[owner.kind] + owner.id
    return {"kind": _KIND, "record_id": record_id, "principal": principal, "owner": json.dumps(typed)}


def _columns(store: dict[str, Any]) -> dict[str, Any]:
    """A record body's settings as the columns of ``0006_knowledge`` (JSON as that version's store wrote it)."""
    values = {column.name: store[column.name] for column in _settings()}
    values |= {name: None if store[name] is None else json.dumps(store[name]) for name in _JSON}
    return values


def _add_columns() -> None:
    """Add the settings' columns; a ``NOT NULL`` one with a default while the rows there have no value."""
    for column in _settings():
        if column.name in _DEFAULTS:
            column.server_default = sa.DefaultClause(_DEFAULTS[column.name])
        op.add_column("vector_stores", column)


def downgrade() -> None:
    """Put the settings back into ``vector_stores`` and the owners into ``record_owners``; drop the records."""
    _add_columns()
    bind = op.get_bind()
    query = sa.select(_records.c.id, _records.c.body, _records.c.owner).where(_records.c.kind == _KIND)
    for record_id, body, owner in bind.execute(query.order_by(_records.c.seq)).all():
        update = sa.update(_stores).where(_stores.c.vector_store_id == record_id)
        bind.execute(update.values(_columns(json.loads(body))))
        if owner is not None:
            bind.execute(sa.insert(_owners).values(_old_owner(record_id, owner)))
    if bind.dialect.name == "postgresql":
        for name in _DEFAULTS:
            op.alter_column("vector_stores", name, server_default=None)
    op.create_index(_INDEX, "vector_stores", ["created_at", "vector_store_id"])
    # Children first: SQLite enforces no ``ON DELETE CASCADE`` on a connection without its foreign keys pragma.
    bind.execute(sa.delete(_terms).where(_terms.c.kind == _KIND))
    bind.execute(sa.delete(_records).where(_records.c.kind == _KIND))
