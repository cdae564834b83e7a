"""Pages of knowledge records by creation: ordered by ``(created_at, id)``, continued after a cursor's record."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from ferryman.errors import NotFoundError
from ferryman.storage.sql.dialects import Compiled, SqlDialect, p
from ferryman.storage.sql.seam import Work


@dataclass(frozen=True)
class Keyset:
    """Where a page starts and how it is ordered."""

    descending: bool
    params: dict[str, Any] = field(default_factory=dict)
    """The bound's parameters (``:cursor_at``, ``:cursor_id``), none without a cursor."""

    @property
    def shape(self) -> Hashable:
        """What of the page changes its statement's text: its direction, and whether it starts after a cursor."""
        return self.descending, bool(self.params)

    def bound(
        self, created_at: sa.ColumnElement[Any], id_column: sa.ColumnElement[Any]
    ) -> list[sa.ColumnElement[bool]]:
        """The ``WHERE`` conditions keeping the records after the cursor's (none without a cursor).

        Args:
            created_at: The table's creation time column.
            id_column: The table's id column.
        """
        if not self.params:
            return []
        row, cursor = sa.tuple_(created_at, id_column), sa.tuple_(p("cursor_at"), p("cursor_id"))
        return [row < cursor if self.descending else row > cursor]

    def order_by(self, created_at: sa.ColumnElement[Any], id_column: sa.ColumnElement[Any]) -> list[Any]:
        """The page's ``ORDER BY``: by creation, then id, in the page's direction.

        Args:
            created_at: The table's creation time column.
            id_column: The table's id column.
        """
        if self.descending:
            return [created_at.desc(), id_column.desc()]
        return [created_at, id_column]


def _cursor_at(d: SqlDialect, table: sa.TableClause, id_column: str, scope: tuple[str, ...]) -> Compiled:
    """The ``created_at`` of the record with id ``:cursor_id`` whose ``scope`` columns equal their parameters."""

    def build() -> sa.Select[Any]:
        where = [table.c[id_column] == p("cursor_id"), *(table.c[name] == p(name) for name in scope)]
        return sa.select(table.c.created_at).where(*where)

    return d.compiled(("keyset.cursor_at", table.name, id_column, scope), build)


def keyset(
    d: SqlDialect, table: sa.TableClause, id_column: str, cursor: str | None, order: str, **scope: str
) -> Work[Keyset]:
    """The page after the cursor's record (``order`` "asc" or "desc"), found among the records of ``scope``.

    Args:
        d: The database's dialect.
        table: The records' table (with ``created_at`` and ``id_column``).
        id_column: The name of the records' id column (the cursor is one of its values).
        cursor: The id of the record the page starts after; None: the page starts at the first record.
        order: "asc" or "desc".
        **scope: Columns (by name) and the values the cursor's record has in them.

    Raises:
        NotFoundError: no record (in scope) has the cursor's id.
    """
    descending = order == "desc"
    if cursor is None:
        return Keyset(descending)
    row = yield _cursor_at(d, table, id_column, tuple(sorted(scope))).first(cursor_id=cursor, **scope)
    if row is None:
        raise NotFoundError(f"'{cursor}' not found (the list's 'after' cursor)")
    return Keyset(descending, {"cursor_at": row[0], "cursor_id": cursor})
