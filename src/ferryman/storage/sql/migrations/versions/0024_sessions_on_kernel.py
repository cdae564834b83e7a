"""Sessions move into the kernel's ``records``; ``sessions`` keeps the anchor their turns and running state hang on.

Each row of ``sessions`` becomes one ``session`` record, a root (not under its agent), in creation order (the
row's ``id``), created at the session's start, indexed by its agent (``k1``; NULL for a session of no agent), its
body the row's own fields (``SessionRecord``: ``started_at`` as ISO text in UTC). Its owner, from
``record_owners``, is stored with it (and its owner terms in ``record_terms``); those owner rows go. The row
stays, under the same id, with its agent and history epoch: turns, messages and conversations name it with
cascading foreign keys. ``session_name`` and ``started_at`` go.

On SQLite the columns are dropped in place (SQLite 3.35 and later), as ``0023_conversations_on_kernel`` drops
its own, not by copying the table as batch mode does: on a connection that enforces foreign keys, dropping the
old table would delete every turn, message and conversation of every session by cascade. PostgreSQL then
analyzes the kernel's tables, whose statistics a bulk copy leaves stale.

``downgrade`` adds the columns back (as ``0001_baseline`` made them), fills them from the records, and puts the
owners back into ``record_owners``. SQLite cannot drop a column's default in place, so there the restored columns
keep the default they were added with (every write of that version sets them).

Revision ID: 0024_sessions_on_kernel
Revises: 0023_conversations_on_kernel
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from ferryman.errors import ConfigurationError
from ferryman.storage.kernel.model import Owner, owner_terms

revision = "0024_sessions_on_kernel"
down_revision = "0023_conversations_on_kernel"
branch_labels = None
depends_on = None

# A revision keeps its own copy of the layouts it converts: the application's may change later.
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_STAMP = sa.DateTime(timezone=True).with_variant(sa.Text(), "sqlite")
_KIND = "session"
_PREFIXES = {"api_key": "key:", "subject": "sub:"}
_DEFAULTS = {"session_name": "", "started_at": "1970-01-01T00:00:00+00:00"}
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
_sessions = sa.table(
    "sessions",
    sa.column("id", _SEQ),
    sa.column("session_id", sa.Text()),
    sa.column("agent_id", sa.Text()),
    sa.column("session_name", sa.Text()),
    sa.column("started_at", _STAMP),
)


def _dump(value: Any) -> str:
    """JSON as the kernel stores it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _moment(value: datetime | str) -> datetime:
    """A stored ``started_at`` (an aware datetime, or ISO text on SQLite) as an aware datetime in UTC."""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


# -- up ------------------------------------------------------------------------------------------------------------


def _owners_of() -> dict[str, Owner]:
    """The sessions' owners in ``record_owners``, by session id."""
    query = sa.select(_owners.c.record_id, _owners.c.owner).where(_owners.c.kind == _KIND)
    return {record_id: Owner.from_json(json.loads(owner)) for record_id, owner in op.get_bind().execute(query)}


def _put(row: sa.RowMapping, owner: Owner | None) -> None:
    """Insert one session's record and its owner terms, as ``Records.put`` writes them."""
    bind = op.get_bind()
    started_at = _moment(row["started_at"])
    # ``SessionRecord``'s fields, in its order, its start as ``codec.dump_time`` writes it.
    body = {
        "session_id": row["session_id"],
        "agent_id": row["agent_id"],
        "session_name": row["session_name"],
        "started_at": started_at.isoformat(),
    }
    values = {
        "kind": _KIND,
        "id": row["session_id"],
        "parent": "",
        "owner_key": None if owner is None else owner.key,
        "owner": None if owner is None else _dump(owner.to_json()),
        "body": _dump(body),
        "at": started_at.timestamp(),
        "k1": row["agent_id"],
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
    """Copy every session into ``records`` with its owner, then drop its moved columns and owner rows."""
    _check_sqlite()
    bind = op.get_bind()
    owners = _owners_of()
    s = _sessions.c
    query = sa.select(s.session_id, s.agent_id, s.session_name, s.started_at).order_by(s.id)
    for row in bind.execute(query).mappings().all():
        _put(row, owners.get(row["session_id"]))
    # Owners of sessions deleted earlier (if any remain) go too: they belong to nothing.
    bind.execute(sa.delete(_owners).where(_owners.c.kind == _KIND))
    for name in _DEFAULTS:
        op.execute(f"ALTER TABLE sessions DROP COLUMN {name}")
    if bind.dialect.name == "postgresql":
        op.execute("ANALYZE records, record_terms")


# -- down ----------------------------------------------------------------------------------------------------------


def _old_owner(record_id: str, stored: str) -> dict[str, Any]:
    """The ``record_owners`` row of an owner as the record stores it (``Owner.to_json``)."""
    owner = Owner.from_json(json.loads(stored))
    typed = {"kind": owner.kind, "id": owner.id, "attributes": {k: list(v) for k, v in owner.attributes.items()}}
    principal = _PREFIXES[owner.kind] + owner.id
    return {"kind": _KIND, "record_id": record_id, "principal": principal, "owner": json.dumps(typed)}


def _stamp(text: str) -> datetime | str:
    """A time for ``sessions.started_at`` from the record's ISO text: that text on SQLite, as its store wrote it."""
    return text if op.get_bind().dialect.name == "sqlite" else datetime.fromisoformat(text)


def downgrade() -> None:
    """Put the columns back into ``sessions`` and the owners into ``record_owners``; drop the records."""
    for column in (sa.Column("session_name", sa.Text()), sa.Column("started_at", _STAMP)):
        column.nullable = False
        column.server_default = sa.DefaultClause(_DEFAULTS[column.name])
        op.add_column("sessions", column)
    bind = op.get_bind()
    query = sa.select(_records.c.id, _records.c.body, _records.c.owner).where(_records.c.kind == _KIND)
    for record_id, body, owner in bind.execute(query.order_by(_records.c.seq)).all():
        session = json.loads(body)
        update = sa.update(_sessions).where(_sessions.c.session_id == record_id)
        bind.execute(update.values(session_name=session["session_name"], started_at=_stamp(session["started_at"])))
        if owner is not None:
            bind.execute(sa.insert(_owners).values(_old_owner(record_id, owner)))
    if bind.dialect.name == "postgresql":
        for name in _DEFAULTS:
            op.alter_column("sessions", name, server_default=None)
    # Children first: SQLite enforces no ``ON DELETE CASCADE`` on a connection without its foreign keys pragma.
    bind.execute(sa.delete(_terms).where(_terms.c.kind == _KIND))
    bind.execute(sa.delete(_records).where(_records.c.kind == _KIND))
