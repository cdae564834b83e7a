"""Each stored response gets its listing record in the kernel's ``records``; ``responses`` keeps the response.

Each row of ``responses`` gets one ``response`` record, a root, in creation order (the row's ``id``), created at
the row's ``created_at``, indexed by its conversation (``k1``; NULL for a response made in none), its body what
lists it (``ResponseHead``: its id, its conversation, its creation time). Its owner, from ``record_owners``, is
stored with it (and its owner terms in ``record_terms``); those owner rows go. The row itself is untouched: it
keeps the response's wire form, status, events, input items and turn under the same id, so nothing is dropped.
PostgreSQL then analyzes the kernel's tables, whose statistics a bulk copy leaves stale.

``downgrade`` puts the owners back into ``record_owners`` from the records, then deletes the records and their
terms.

Revision ID: 0025_responses_on_kernel
Revises: 0024_sessions_on_kernel
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

from ferryman.storage.kernel.model import Owner, owner_terms

revision = "0025_responses_on_kernel"
down_revision = "0024_sessions_on_kernel"
branch_labels = None
depends_on = None

# A revision keeps its own copy of the layouts it converts: the application's may change later.
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_KIND = "response"
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
)
_terms = sa.table("record_terms", sa.column("kind", sa.Text()), sa.column("term", sa.Text()), sa.column("seq", _SEQ))
_owners = sa.table(
    "record_owners",
    sa.column("kind", sa.Text()),
    sa.column("record_id", sa.Text()),
    sa.column("principal", sa.Text()),
    sa.column("owner", sa.Text()),
)
_responses = sa.table(
    "responses",
    sa.column("id", _SEQ),
    sa.column("response_id", sa.Text()),
    sa.column("conversation_id", sa.Text()),
    sa.column("created_at", sa.BigInteger()),
)


def _dump(value: Any) -> str:
    """JSON as the kernel stores it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# -- up ------------------------------------------------------------------------------------------------------------


def _owners_of() -> dict[str, Owner]:
    """The responses' owners in ``record_owners``, by response id."""
    query = sa.select(_owners.c.record_id, _owners.c.owner).where(_owners.c.kind == _KIND)
    return {record_id: Owner.from_json(json.loads(owner)) for record_id, owner in op.get_bind().execute(query)}


def _put(row: sa.RowMapping, owner: Owner | None) -> None:
    """Insert one response's record and its owner terms, as ``Records.put`` writes them."""
    bind = op.get_bind()
    created_at = int(row["created_at"])
    # ``ResponseHead``'s fields, in its order.
    body = {"response_id": row["response_id"], "conversation_id": row["conversation_id"], "created_at": created_at}
    values = {
        "kind": _KIND,
        "id": row["response_id"],
        "parent": "",
        "owner_key": None if owner is None else owner.key,
        "owner": None if owner is None else _dump(owner.to_json()),
        "body": _dump(body),
        "at": float(created_at),
        "k1": row["conversation_id"],
    }
    # One row at a time: the sequence must number them in this order, which a multi-row insert leaves open.
    seq = bind.execute(sa.insert(_records).values(values).returning(_records.c.seq)).scalar_one()
    terms = [{"kind": _KIND, "term": term, "seq": seq} for term in sorted(owner_terms(owner))]
    bind.execute(sa.insert(_terms), terms)


def upgrade() -> None:
    """Give every response its record with its owner, then drop the responses' owner rows."""
    bind = op.get_bind()
    owners = _owners_of()
    r = _responses.c
    query = sa.select(r.response_id, r.conversation_id, r.created_at).order_by(r.id)
    for row in bind.execute(query).mappings().all():
        _put(row, owners.get(row["response_id"]))
    # Owners of responses deleted earlier (if any remain) go too: they belong to nothing.
    bind.execute(sa.delete(_owners).where(_owners.c.kind == _KIND))
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
    """Put the responses' owners back into ``record_owners``; drop their records."""
    bind = op.get_bind()
    query = sa.select(_records.c.id, _records.c.owner).where(_records.c.kind == _KIND, _records.c.owner.is_not(None))
    for record_id, owner in bind.execute(query.order_by(_records.c.seq)).all():
        bind.execute(sa.insert(_owners).values(_old_owner(record_id, owner)))
    # Children first: SQLite enforces no ``ON DELETE CASCADE`` on a connection without its foreign keys pragma.
    bind.execute(sa.delete(_terms).where(_terms.c.kind == _KIND))
    bind.execute(sa.delete(_records).where(_records.c.kind == _KIND))
