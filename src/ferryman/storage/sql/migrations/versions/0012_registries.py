"""Registered models, toolgroups, shields and API keys move into the kernel's ``records`` (a data revision).

Each row becomes one record, in the order the old table kept (its ``id``; API keys by creation time, then
name), created at the row's ``created_at``. Its owner, from ``record_owners``, is stored with it (and its owner
terms in ``record_terms``); those owner rows go, with the old tables. Bodies are what this version writes: a
registration's JSON without its null fields (the wire model's ``exclude_none`` dump), a model's columns as its
wire form, an API key's columns with times as epoch seconds.

``downgrade`` puts the rows back into the old tables (a registration's JSON then lacks its null fields, which
the earlier versions read as the same value), and the owners back into ``record_owners``.

Revision ID: 0012_registries
Revises: 0011_kernel_tables
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from ferryman.storage.kernel.model import Owner, owner_terms

revision = "0012_registries"
down_revision = "0011_kernel_tables"
branch_labels = None
depends_on = None

# A revision keeps its own copy of the layouts it converts: the application's may change later.
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_STAMP = sa.DateTime(timezone=True).with_variant(sa.Text(), "sqlite")
_EPOCH = sa.DateTime(timezone=True).with_variant(sa.REAL(), "sqlite")
_SEQ = _ID
_PREFIXES = {"api_key": "key:", "subject": "sub:"}
_OWNED = ("model", "toolgroup", "shield")
_KINDS = (*_OWNED, "api_key")
_REGISTRATIONS = {"toolgroup": ("toolgroups", "toolgroup_id"), "shield": ("shields", "shield_id")}
_MODEL_COLUMNS = ("provider_id", "provider_resource_id", "model_type")

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
    sa.column("k1", sa.Text()),
)
_terms = sa.table("record_terms", sa.column("kind", sa.Text()), sa.column("term", sa.Text()), sa.column("seq", _SEQ))
_owners = sa.table(
    "record_owners",
    sa.column("kind", sa.Text()),
    sa.column("record_id", sa.Text()),
    sa.column("principal", sa.Text()),
    sa.column("owner", sa.Text()),
)
_models = sa.table(
    "models",
    sa.column("id", _ID),
    sa.column("model_id", sa.Text()),
    *(sa.column(name, sa.Text()) for name in _MODEL_COLUMNS),
    sa.column("metadata", sa.Text()),
    sa.column("created_at", _STAMP),
)
_api_keys = sa.table(
    "api_keys",
    sa.column("key_hash", sa.Text()),
    sa.column("name", sa.Text()),
    sa.column("attributes", sa.Text()),
    sa.column("created_at", _EPOCH),
    sa.column("revoked_at", _EPOCH),
)


def _registration_table(table: str, id_column: str) -> sa.TableClause:
    return sa.table(
        table,
        sa.column("id", _ID),
        sa.column(id_column, sa.Text()),
        sa.column("body", sa.Text()),
        sa.column("created_at", _STAMP),
    )


def _dump(value: Any) -> str:
    """JSON as the kernel stores it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _epoch(value: datetime | str | float | None) -> float | None:
    """A stored time (an aware datetime, ISO text on SQLite, or epoch seconds) as epoch seconds."""
    if value is None or isinstance(value, float | int):
        return value
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _at(value: datetime | str | float) -> float:
    """A time stored in a column that holds one always, as epoch seconds."""
    found = _epoch(value)
    assert found is not None
    return found


def _moment(at: float | None) -> datetime | None:
    return None if at is None else datetime.fromtimestamp(at, UTC)


def _stamp(at: float) -> datetime | str:
    """A time for a ``created_at`` column of the old tables: ISO text on SQLite, as its store wrote it."""
    moment = datetime.fromtimestamp(at, UTC)
    return moment.isoformat() if op.get_bind().dialect.name == "sqlite" else moment


def _instant(at: float | None) -> datetime | float | None:
    """A time for an API key's column: epoch seconds on SQLite."""
    return at if op.get_bind().dialect.name == "sqlite" else _moment(at)


# -- up ------------------------------------------------------------------------------------------------------------

Row = tuple[str, dict[str, Any], float]
"""A record to write: its id, body and creation time."""


def _model_rows() -> Iterator[Row]:
    columns = (_models.c.model_id, *(_models.c[n] for n in _MODEL_COLUMNS), _models.c.metadata, _models.c.created_at)
    for model_id, provider_id, resource_id, model_type, metadata, created_at in op.get_bind().execute(
        sa.select(*columns).order_by(_models.c.id)
    ):
        body = {
            "identifier": model_id,
            "provider_id": provider_id,
            "provider_resource_id": resource_id,
            "type": "model",
            "model_type": model_type,
            "metadata": json.loads(metadata),
        }
        yield model_id, body, _at(created_at)


def _registrations(kind: str) -> Callable[[], Iterator[Row]]:
    table, id_column = _REGISTRATIONS[kind]
    source = _registration_table(table, id_column)

    def rows() -> Iterator[Row]:
        query = sa.select(source.c[id_column], source.c.body, source.c.created_at).order_by(source.c.id)
        for entry_id, body, created_at in op.get_bind().execute(query):
            # The old body is the wire model's full dump; this version's leaves its null fields out.
            kept = {name: value for name, value in json.loads(body).items() if value is not None}
            yield entry_id, kept, _at(created_at)

    return rows


def _api_key_rows() -> Iterator[Row]:
    t = _api_keys
    query = sa.select(t.c.name, t.c.key_hash, t.c.attributes, t.c.created_at, t.c.revoked_at)
    for name, key_hash, attributes, created_at, revoked_at in op.get_bind().execute(
        query.order_by(t.c.created_at, t.c.name)
    ):
        at = _at(created_at)
        body = {
            "name": name,
            "key_hash": key_hash,
            "attributes": json.loads(attributes),
            "created_at": at,
            "revoked_at": _epoch(revoked_at),
        }
        yield name, body, at


def _owners_of(kind: str) -> dict[str, Owner]:
    query = sa.select(_owners.c.record_id, _owners.c.owner).where(_owners.c.kind == kind)
    return {record_id: Owner.from_json(json.loads(owner)) for record_id, owner in op.get_bind().execute(query)}


def _put(kind: str, row: Row, owner: Owner | None) -> None:
    """Insert one record and its owner terms."""
    record_id, body, at = row
    bind = op.get_bind()
    values = {
        "kind": kind,
        "id": record_id,
        "parent": "",
        "owner_key": None if owner is None else owner.key,
        "owner": None if owner is None else _dump(owner.to_json()),
        "body": _dump(body),
        "at": at,
        # The one declared index of these kinds: an API key's hash (``k1``).
        "k1": body["key_hash"] if kind == "api_key" else None,
    }
    # One row at a time: the sequence must number them in this order, which a multi-row insert leaves open.
    seq = bind.execute(sa.insert(_records).values(values).returning(_records.c.seq)).scalar_one()
    terms = [{"kind": kind, "term": term, "seq": seq} for term in sorted(owner_terms(owner))]
    bind.execute(sa.insert(_terms), terms)


def upgrade() -> None:
    """Copy every registration and API key into ``records``, then drop the old tables and their owner rows."""
    sources: dict[str, Callable[[], Iterator[Row]]] = {
        "model": _model_rows,
        "toolgroup": _registrations("toolgroup"),
        "shield": _registrations("shield"),
        "api_key": _api_key_rows,
    }
    for kind, rows in sources.items():
        owners = _owners_of(kind) if kind in _OWNED else {}
        for row in rows():
            _put(kind, row, owners.get(row[0]))
    # Owners of records deleted earlier (if any remain) go too: they belong to nothing.
    op.get_bind().execute(sa.delete(_owners).where(_owners.c.kind.in_(_OWNED)))
    for table in ("models", "toolgroups", "shields", "api_keys"):
        op.drop_table(table)


# -- down ----------------------------------------------------------------------------------------------------------


def _create_old_tables() -> None:
    """The tables as revisions 0001, 0004, 0007 and 0008 made them."""
    op.create_table(
        "models",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("model_id", sa.Text(), nullable=False, unique=True),
        *(sa.Column(name, sa.Text(), nullable=False) for name in (*_MODEL_COLUMNS, "metadata")),
        sa.Column("created_at", _STAMP, nullable=False),
    )
    op.create_table(
        "api_keys",
        sa.Column("key_hash", sa.Text(), primary_key=True),
        sa.Column("name", sa.Text(), nullable=False, unique=True),
        sa.Column("attributes", sa.Text(), nullable=False),
        sa.Column("created_at", _EPOCH, nullable=False),
        sa.Column("revoked_at", _EPOCH, nullable=True),
    )
    for table, id_column in _REGISTRATIONS.values():
        op.create_table(
            table,
            sa.Column("id", _ID, primary_key=True, autoincrement=True),
            sa.Column(id_column, sa.Text(), nullable=False, unique=True),
            sa.Column("body", sa.Text(), nullable=False),
            sa.Column("created_at", _STAMP, nullable=False),
        )


def _old_row(kind: str, record_id: str, body: dict[str, Any], at: float) -> tuple[sa.TableClause, dict[str, Any]]:
    """The table and row an earlier version stored a record of ``kind`` as."""
    if kind == "model":
        fields = {name: body[name] for name in _MODEL_COLUMNS}
        row = {"model_id": record_id, **fields, "metadata": json.dumps(body.get("metadata", {}))}
        return _models, row | {"created_at": _stamp(at)}
    if kind == "api_key":
        row = {"name": record_id, "key_hash": body["key_hash"], "attributes": json.dumps(body["attributes"])}
        return _api_keys, row | {"created_at": _instant(body["created_at"]), "revoked_at": _instant(body["revoked_at"])}
    table, id_column = _REGISTRATIONS[kind]
    entry = {id_column: record_id, "body": _dump(body), "created_at": _stamp(at)}
    return _registration_table(table, id_column), entry


def _old_owner(kind: str, record_id: str, stored: str) -> dict[str, Any]:
    """The ``record_owners`` row of an owner as the record stores it (``Owner.to_json``)."""
    owner = Owner.from_json(json.loads(stored))
    typed = {"kind": owner.kind, "id": owner.id, "attributes": {k: list(v) for k, v in owner.attributes.items()}}
    principal = _PREFIXES[owner.kind] + owner.id
    return {"kind": kind, "record_id": record_id, "principal": principal, "owner": json.dumps(typed)}


def downgrade() -> None:
    """Put the records back into the tables of the earlier versions, their owners into ``record_owners``."""
    _create_old_tables()
    bind = op.get_bind()
    query = sa.select(_records.c.kind, _records.c.id, _records.c.body, _records.c.at, _records.c.owner)
    for kind, record_id, body, at, owner in bind.execute(
        query.where(_records.c.kind.in_(_KINDS)).order_by(_records.c.seq)
    ).all():
        table, row = _old_row(kind, record_id, json.loads(body), at)
        bind.execute(sa.insert(table).values(row))
        if owner is not None and kind in _OWNED:
            bind.execute(sa.insert(_owners).values(_old_owner(kind, record_id, owner)))
    # Children first: SQLite enforces no ``ON DELETE CASCADE`` on a connection without its foreign keys pragma.
    bind.execute(sa.delete(_terms).where(_terms.c.kind.in_(_KINDS)))
    bind.execute(sa.delete(_records).where(_records.c.kind.in_(_KINDS)))
