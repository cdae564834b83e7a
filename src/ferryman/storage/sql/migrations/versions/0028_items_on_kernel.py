"""Items move into the kernel's ``records``; the ``items`` table goes.

Each row of ``items`` becomes one ``item`` record under its container, the record of one of the kinds
``conversation``, ``response`` or ``fork`` whose id is the row's ``owner`` (the earliest, as the kernel's put finds
a parent), with the id ``<owner>/<item_id>``, the row's body, no owner of its own (the one term of the server's
records), created when its container was. Records are numbered after every record there is, in the rows' order,
so each container lists its items as before. A row whose container no record holds belongs to nothing the API
can reach (its container was deleted by a version that left it): it goes with the table. PostgreSQL then
analyzes the kernel's tables, whose statistics a bulk copy leaves stale.

``downgrade`` creates ``items`` again as revision ``0001_baseline`` made it and fills it from the records, in
their order, then deletes the records and their terms.

Revision ID: 0028_items_on_kernel
Revises: 0027_drop_record_keys
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028_items_on_kernel"
down_revision = "0027_drop_record_keys"
branch_labels = None
depends_on = None

# A revision keeps its own copy of the layouts it converts: the application's may change later.
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_KIND = "item"
_CONTAINERS = ("conversation", "response", "fork")
_UNOWNED = "-"

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
_items = sa.table(
    "items", sa.column("id", _SEQ), sa.column("item_id", sa.Text()), sa.column("owner", sa.Text()), sa.column("body")
)


# -- up ------------------------------------------------------------------------------------------------------------


def _moved(base: int) -> sa.Select[tuple[object, ...]]:
    """Each item row that has a container, as its record's columns, numbered from ``base + 1`` in row order."""
    i = _items.c
    candidates = _records.alias("candidate")
    first = (
        sa.select(candidates.c.id, sa.func.min(candidates.c.seq).label("seq"))
        .where(candidates.c.kind.in_(_CONTAINERS))
        .group_by(candidates.c.id)
        .subquery("first_container")
    )
    container = _records.alias("container")
    return (
        sa.select(
            (sa.literal(base) + sa.func.row_number().over(order_by=i.id)).label("seq"),
            sa.literal(_KIND).label("kind"),
            i.owner.concat("/").concat(i.item_id).label("id"),
            i.owner.label("parent"),
            first.c.seq.label("parent_seq"),
            i.body,
            container.c.at,
        )
        .select_from(_items)
        .join(first, first.c.id == i.owner)
        .join(container, container.c.seq == first.c.seq)
    )


def _last_drawn(bind: sa.Connection) -> int:
    """The highest number ``records`` has given, its rows' or a deleted record's: no number is given twice."""
    if bind.dialect.name == "postgresql":
        drawn = "SELECT pg_sequence_last_value(pg_get_serial_sequence('records', 'seq')::regclass)"
    else:
        drawn = "SELECT seq FROM sqlite_sequence WHERE name = 'records'"
    last = bind.exec_driver_sql(drawn).scalar()
    highest = bind.execute(sa.select(sa.func.max(_records.c.seq))).scalar()
    return max(int(last or 0), int(highest or 0))


def upgrade() -> None:
    """Copy every item with a container into ``records``, with its term, then drop ``items``."""
    bind = op.get_bind()
    base = _last_drawn(bind)
    columns = ["seq", "kind", "id", "parent", "parent_seq", "body", "at"]
    bind.execute(sa.insert(_records).from_select(columns, _moved(base)))
    count = int(bind.execute(sa.select(sa.func.count()).where(_records.c.kind == _KIND)).scalar_one())
    moved = sa.select(sa.literal(_KIND), sa.literal(_UNOWNED), _records.c.seq).where(_records.c.kind == _KIND)
    bind.execute(sa.insert(_terms).from_select(["kind", "term", "seq"], moved))
    if bind.dialect.name == "postgresql" and count > 0:
        # The numbers were given here, not drawn: the sequence moves past them (SQLite's follows by itself).
        bind.exec_driver_sql(f"SELECT setval(pg_get_serial_sequence('records', 'seq'), {base + count})")
    op.drop_index("items_of_owner", table_name="items")
    op.drop_table("items")
    if bind.dialect.name == "postgresql":
        op.execute("ANALYZE records, record_terms")


# -- down ----------------------------------------------------------------------------------------------------------


def downgrade() -> None:
    """Create ``items`` again and fill it from the item records, in their order; drop the records."""
    op.create_table(
        "items",
        sa.Column("id", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("item_id", sa.Text(), nullable=False),
        sa.Column("owner", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.UniqueConstraint("owner", "item_id"),
    )
    op.create_index("items_of_owner", "items", ["owner", "id"])
    r = _records.c
    rows = sa.select(
        sa.func.row_number().over(order_by=r.seq),
        sa.func.substr(r.id, sa.func.length(r.parent) + 2),
        r.parent,
        r.body,
    ).where(r.kind == _KIND)
    bind = op.get_bind()
    bind.execute(sa.insert(_items).from_select(["id", "item_id", "owner", "body"], rows))
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql(
            "SELECT setval(pg_get_serial_sequence('items', 'id'), max(id)) FROM items HAVING max(id) IS NOT NULL"
        )
    # Children first: SQLite enforces no ``ON DELETE CASCADE`` on a connection without its foreign keys pragma.
    bind.execute(sa.delete(_terms).where(_terms.c.kind == _KIND))
    bind.execute(sa.delete(_records).where(r.kind == _KIND))
