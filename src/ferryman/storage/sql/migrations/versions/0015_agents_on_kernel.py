"""Agents move into the kernel's ``records`` (a data revision); sessions stay, without their foreign key.

Each row of ``agents`` becomes one ``agent`` record, in the table's order (its ``id``), created at the row's
``created_at``, its body the wire ``Agent`` (``agent_id``, ``agent_config``, ``created_at``) as this version
writes it. Its owner, from ``record_owners``, is stored with it (and its owner terms in ``record_terms``);
those owner rows go, with the table. The foreign key from ``sessions.agent_id`` to ``agents`` goes first (on
SQLite by rebuilding the table): the service now checks a session's agent exists, in the kernel, and deletes
an agent's sessions itself. PostgreSQL then analyzes the kernel's tables, whose statistics a bulk copy leaves
stale enough to read a caller's page of agents from the wrong index.

``downgrade`` puts the records back into ``agents``, their owners into ``record_owners``, and the foreign key
back on ``sessions`` (sessions of an agent deleted meanwhile, if any, are dropped first: the key forbids them).

Revision ID: 0015_agents_on_kernel
Revises: 0014_responses_of_turn
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from ferryman.storage.kernel.model import Owner, owner_terms

revision = "0015_agents_on_kernel"
down_revision = "0014_responses_of_turn"
branch_labels = None
depends_on = None

# A revision keeps its own copy of the layouts it converts: the application's may change later.
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_STAMP = sa.DateTime(timezone=True).with_variant(sa.Text(), "sqlite")
_SEQ = _ID
_KIND = "agent"
_PREFIXES = {"api_key": "key:", "subject": "sub:"}
_FK = "fk_sessions_agent_id_agents"
_NAMING = {"fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s"}
"""Names SQLite's unnamed foreign key on ``sessions`` (as the baseline made it) so a table rebuild can drop it."""

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
_agents = sa.table(
    "agents",
    sa.column("id", _ID),
    sa.column("agent_id", sa.Text()),
    sa.column("config", sa.Text()),
    sa.column("created_at", _STAMP),
)
_sessions = sa.table("sessions", sa.column("agent_id", sa.Text()))


def _dump(value: Any) -> str:
    """JSON as the kernel stores it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _moment(value: datetime | str) -> datetime:
    """A stored ``created_at`` (an aware datetime, or ISO text on SQLite) as an aware datetime in UTC."""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def _wire_time(moment: datetime) -> str:
    """A time as the wire model's JSON dump writes it (pydantic: ISO 8601, UTC as ``Z``)."""
    return moment.isoformat().replace("+00:00", "Z")


# -- up ------------------------------------------------------------------------------------------------------------


def _drop_session_key() -> None:
    """Drop the foreign key from ``sessions.agent_id`` to ``agents`` (whatever the database named it)."""
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        # Rebuilt without it; no cascade runs meanwhile: the migration's connection leaves foreign keys off.
        with op.batch_alter_table("sessions", naming_convention=_NAMING) as batch:
            batch.drop_constraint(_FK, type_="foreignkey")
        return
    for key in sa.inspect(bind).get_foreign_keys("sessions"):
        if key["referred_table"] == "agents" and key["name"]:
            op.drop_constraint(key["name"], "sessions", type_="foreignkey")


def _owners_of() -> dict[str, Owner]:
    query = sa.select(_owners.c.record_id, _owners.c.owner).where(_owners.c.kind == _KIND)
    return {record_id: Owner.from_json(json.loads(owner)) for record_id, owner in op.get_bind().execute(query)}


def _put(agent_id: str, config: str, created_at: datetime | str, owner: Owner | None) -> None:
    """Insert one agent record and its owner terms, as ``Records.put`` writes them."""
    bind = op.get_bind()
    moment = _moment(created_at)
    body = {"agent_id": agent_id, "agent_config": json.loads(config), "created_at": _wire_time(moment)}
    values = {
        "kind": _KIND,
        "id": agent_id,
        "parent": "",
        "owner_key": None if owner is None else owner.key,
        "owner": None if owner is None else _dump(owner.to_json()),
        "body": _dump(body),
        "at": moment.timestamp(),
    }
    # One row at a time: the sequence must number them in this order, which a multi-row insert leaves open.
    seq = bind.execute(sa.insert(_records).values(values).returning(_records.c.seq)).scalar_one()
    terms = [{"kind": _KIND, "term": term, "seq": seq} for term in sorted(owner_terms(owner))]
    bind.execute(sa.insert(_terms), terms)


def upgrade() -> None:
    """Copy every agent into ``records`` with its owner, then drop the foreign key, the table and its owners."""
    bind = op.get_bind()
    _drop_session_key()
    owners = _owners_of()
    query = sa.select(_agents.c.agent_id, _agents.c.config, _agents.c.created_at).order_by(_agents.c.id)
    for agent_id, config, created_at in bind.execute(query).all():
        _put(agent_id, config, created_at, owners.get(agent_id))
    # Owners of agents deleted earlier (if any remain) go too: they belong to nothing.
    bind.execute(sa.delete(_owners).where(_owners.c.kind == _KIND))
    op.drop_table("agents")
    if bind.dialect.name == "postgresql":
        op.execute("ANALYZE records, record_terms")


# -- down ----------------------------------------------------------------------------------------------------------


def _stamp(moment: datetime) -> datetime | str:
    """A time for ``agents.created_at``: ISO text on SQLite, as its store wrote it."""
    return moment.isoformat() if op.get_bind().dialect.name == "sqlite" else moment


def _old_owner(record_id: str, stored: str) -> dict[str, Any]:
    """The ``record_owners`` row of an owner as the record stores it (``Owner.to_json``)."""
    owner = Owner.from_json(json.loads(stored))
    typed = {"kind": owner.kind, "id": owner.id, "attributes": {k: list(v) for k, v in owner.attributes.items()}}
    principal = _PREFIXES[owner.kind] + owner.id
    return {"kind": _KIND, "record_id": record_id, "principal": principal, "owner": json.dumps(typed)}


_DOOMED = "SELECT session_id FROM sessions WHERE agent_id IS NOT NULL AND agent_id NOT IN (SELECT agent_id FROM agents)"
_DOOMED_TURNS = "SELECT turn_id FROM turns WHERE session_id IN (" + _DOOMED + ")"  # noqa: S608
_ORPHANS = (
    "DELETE FROM response_events WHERE response_id IN "  # noqa: S608
    "(SELECT response_id FROM responses WHERE turn_id IN (" + _DOOMED_TURNS + "))",
    "DELETE FROM responses WHERE turn_id IN (" + _DOOMED_TURNS + ")",  # noqa: S608
    "DELETE FROM turn_events WHERE turn_id IN (" + _DOOMED_TURNS + ")",  # noqa: S608
    "DELETE FROM steps WHERE turn_id IN (" + _DOOMED_TURNS + ")",  # noqa: S608
    "DELETE FROM messages WHERE session_id IN (" + _DOOMED + ")",  # noqa: S608
    "DELETE FROM conversations WHERE session_id IN (" + _DOOMED + ")",  # noqa: S608
    "DELETE FROM turns WHERE session_id IN (" + _DOOMED + ")",  # noqa: S608
    "DELETE FROM sessions WHERE session_id IN (" + _DOOMED + ")",  # noqa: S608
)
"""What goes before the key comes back: the sessions of agents that are gone, and all under them."""


def _add_session_key() -> None:
    """The foreign key from ``sessions.agent_id`` to ``agents`` as the baseline made it (cascading deletes)."""
    bind = op.get_bind()
    # The key forbids sessions of an agent that is gone (one deleted while a session was opened, a fork's
    # holder): they go, with what hangs under them, children first, as SQLite's connection here runs no
    # cascades (its foreign keys pragma is off).
    for statement in _ORPHANS:
        bind.execute(sa.text(statement))
    if bind.dialect.name == "sqlite":
        with op.batch_alter_table("sessions", naming_convention=_NAMING) as batch:
            batch.create_foreign_key(_FK, "agents", ["agent_id"], ["agent_id"], ondelete="CASCADE")
        return
    op.create_foreign_key(
        "sessions_agent_id_fkey", "sessions", "agents", ["agent_id"], ["agent_id"], ondelete="CASCADE"
    )


def downgrade() -> None:
    """Put the agent records back into ``agents``, their owners into ``record_owners``, and the foreign key."""
    op.create_table(
        "agents",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("agent_id", sa.Text(), nullable=False, unique=True),
        sa.Column("config", sa.Text(), nullable=False),
        sa.Column("created_at", _STAMP, nullable=False),
    )
    bind = op.get_bind()
    query = sa.select(_records.c.id, _records.c.body, _records.c.owner).where(_records.c.kind == _KIND)
    for record_id, body, owner in bind.execute(query.order_by(_records.c.seq)).all():
        agent = json.loads(body)
        row = {
            "agent_id": record_id,
            "config": _dump(agent["agent_config"]),
            "created_at": _stamp(_moment(agent["created_at"].replace("Z", "+00:00"))),
        }
        bind.execute(sa.insert(_agents).values(row))
        if owner is not None:
            bind.execute(sa.insert(_owners).values(_old_owner(record_id, owner)))
    # Children first: SQLite enforces no ``ON DELETE CASCADE`` on a connection without its foreign keys pragma.
    bind.execute(sa.delete(_terms).where(_terms.c.kind == _KIND))
    bind.execute(sa.delete(_records).where(_records.c.kind == _KIND))
    _add_session_key()
