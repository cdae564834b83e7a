"""Files (uploaded files' metadata) move into the kernel's ``records`` (a data revision).

Each row of ``files`` becomes one ``file`` record, in the order files were listed (``created_at``, then
``file_id``), created at the row's ``created_at``, its body the row's columns (``FileRecord``: ``expires_at``
null when the file never expires), its purpose the kind's index, and a lease until its expiry when it has one
(the expiry sweep's). Its owner, from ``record_owners``, is
stored with it (and its owner terms in ``record_terms``); those owner rows go, with the table. No foreign key
names ``files``: attachments to vector stores keep their file ids as they are. PostgreSQL then analyzes the
kernel's tables, whose statistics a bulk copy leaves stale.

``downgrade`` puts the records back into ``files`` (as ``0006_knowledge`` made it) and their owners into
``record_owners``.

Revision ID: 0020_files_on_kernel
Revises: 0019_drop_fulltext
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

from ferryman.storage.kernel.model import Owner, owner_terms

revision = "0020_files_on_kernel"
down_revision = "0019_drop_fulltext"
branch_labels = None
depends_on = None

# A revision keeps its own copy of the layouts it converts: the application's may change later.
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_KIND = "file"
_PREFIXES = {"api_key": "key:", "subject": "sub:"}

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
    sa.column("lease_until", sa.Float()),
)
_terms = sa.table("record_terms", sa.column("kind", sa.Text()), sa.column("term", sa.Text()), sa.column("seq", _SEQ))
_owners = sa.table(
    "record_owners",
    sa.column("kind", sa.Text()),
    sa.column("record_id", sa.Text()),
    sa.column("principal", sa.Text()),
    sa.column("owner", sa.Text()),
)
_files = sa.table(
    "files",
    sa.column("file_id", sa.Text()),
    sa.column("filename", sa.Text()),
    sa.column("purpose", sa.Text()),
    sa.column("bytes", sa.BigInteger()),
    sa.column("created_at", sa.BigInteger()),
    sa.column("mime_type", sa.Text()),
    sa.column("expires_at", sa.BigInteger()),
)


def _dump(value: Any) -> str:
    """JSON as the kernel stores it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# -- up ------------------------------------------------------------------------------------------------------------


def _owners_of() -> dict[str, Owner]:
    """The files' owners in ``record_owners``, by file id."""
    query = sa.select(_owners.c.record_id, _owners.c.owner).where(_owners.c.kind == _KIND)
    return {record_id: Owner.from_json(json.loads(owner)) for record_id, owner in op.get_bind().execute(query)}


def _put(file: dict[str, Any], owner: Owner | None) -> None:
    """Insert one file record and its owner terms, as ``Records.put`` writes them."""
    bind = op.get_bind()
    values = {
        "kind": _KIND,
        "id": file["file_id"],
        "parent": "",
        "owner_key": None if owner is None else owner.key,
        "owner": None if owner is None else _dump(owner.to_json()),
        "body": _dump(file),
        "at": float(file["created_at"]),
        "k1": file["purpose"],
        # A file that expires is leased until then: the expiry sweep deletes it once the lease ends.
        "lease_until": None if file["expires_at"] is None else float(file["expires_at"]),
    }
    # One row at a time: the sequence must number them in this order, which a multi-row insert leaves open.
    seq = bind.execute(sa.insert(_records).values(values).returning(_records.c.seq)).scalar_one()
    terms = [{"kind": _KIND, "term": term, "seq": seq} for term in sorted(owner_terms(owner))]
    bind.execute(sa.insert(_terms), terms)


def upgrade() -> None:
    """Copy every file into ``records`` with its owner, then drop the table and the files' owner rows."""
    bind = op.get_bind()
    owners = _owners_of()
    query = sa.select(*_files.c).order_by(_files.c.created_at, _files.c.file_id)
    for row in bind.execute(query).mappings().all():
        file = dict(row)
        _put(file, owners.get(file["file_id"]))
    # Owners of files deleted earlier (if any remain) go too: they belong to nothing.
    bind.execute(sa.delete(_owners).where(_owners.c.kind == _KIND))
    op.drop_table("files")
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
    """Put the file records back into ``files`` and their owners into ``record_owners``."""
    op.create_table(
        "files",
        sa.Column("file_id", sa.Text(), primary_key=True),
        sa.Column("filename", sa.Text(), nullable=False),
        sa.Column("purpose", sa.Text(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("mime_type", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
    )
    op.create_index("files_by_creation", "files", ["created_at", "file_id"])
    bind = op.get_bind()
    query = sa.select(_records.c.id, _records.c.body, _records.c.owner).where(_records.c.kind == _KIND)
    for record_id, body, owner in bind.execute(query.order_by(_records.c.seq)).all():
        file = json.loads(body)
        bind.execute(sa.insert(_files).values({column.name: file[column.name] for column in _files.c}))
        if owner is not None:
            bind.execute(sa.insert(_owners).values(_old_owner(record_id, owner)))
    # Children first: SQLite enforces no ``ON DELETE CASCADE`` on a connection without its foreign keys pragma.
    bind.execute(sa.delete(_terms).where(_terms.c.kind == _KIND))
    bind.execute(sa.delete(_records).where(_records.c.kind == _KIND))
