"""A turn's owner moves into its own row (``turns.owner``); ``record_owners`` goes.

Turns were the last kind whose owner lived beside it, in ``record_owners``, where a deleted turn's owner stayed
for good. Each turn's owner row is copied into the turn's new ``owner`` column (the same text: the owner's JSON),
so it is written in the turn's own insert and deleted with it. Rows of any other kind are owners of records that
earlier revisions moved into the kernel, which already dropped theirs; rows whose turn is gone are the leak
itself. The table goes with both.

``downgrade`` puts the turns' owners back into a new ``record_owners`` and drops the column (in place on SQLite,
3.35 and later).

Revision ID: 0026_turn_owners_in_turns
Revises: 0025_responses_on_kernel
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0026_turn_owners_in_turns"
down_revision = "0025_responses_on_kernel"
branch_labels = None
depends_on = None

# A revision keeps its own copy of the layouts it converts: the application's may change later.
_KIND = "turn"
_PREFIXES = {"api_key": "key:", "subject": "sub:"}
_turns = sa.table("turns", sa.column("turn_id", sa.Text()), sa.column("owner", sa.Text()))
_owners = sa.table(
    "record_owners",
    sa.column("kind", sa.Text()),
    sa.column("record_id", sa.Text()),
    sa.column("principal", sa.Text()),
    sa.column("owner", sa.Text()),
)


def upgrade() -> None:
    """Copy each turn's owner into its row, then drop ``record_owners``."""
    op.add_column("turns", sa.Column("owner", sa.Text(), nullable=True))
    owner = (
        sa.select(_owners.c.owner)
        .where(_owners.c.kind == _KIND, _owners.c.record_id == _turns.c.turn_id)
        .scalar_subquery()
    )
    # Only the owned turns: rewriting every row would bloat a large PostgreSQL table for nothing.
    owned = sa.select(_owners.c.record_id).where(_owners.c.kind == _KIND)
    op.get_bind().execute(sa.update(_turns).where(_turns.c.turn_id.in_(owned)).values(owner=owner))
    op.drop_table("record_owners")


def downgrade() -> None:
    """Put the turns' owners back into ``record_owners``; drop the column."""
    op.create_table(
        "record_owners",
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("record_id", sa.Text(), nullable=False),
        sa.Column("principal", sa.Text(), nullable=False),
        sa.Column("owner", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "record_id"),
    )
    bind = op.get_bind()
    owned = bind.execute(sa.select(_turns.c.turn_id, _turns.c.owner).where(_turns.c.owner.is_not(None)))
    rows = [
        {"kind": _KIND, "record_id": turn_id, "principal": _principal(owner), "owner": owner}
        for turn_id, owner in owned
    ]
    if rows:
        bind.execute(sa.insert(_owners), rows)
    # In place, never by copying the table as batch mode does: on a connection that enforces foreign keys,
    # dropping the copied ``turns`` would cascade to every step, message and event.
    op.execute("ALTER TABLE turns DROP COLUMN owner")


def _principal(owner: str) -> str:
    """The ``principal`` column of an owner's row: ``key:NAME``, ``sub:ID`` or ``<kind>:<id>``."""
    data = json.loads(owner)
    return _PREFIXES.get(data["kind"], f"{data['kind']}:") + str(data["id"])
