"""Pages of knowledge records by creation: ordered by ``(created_at, id)``, continued after a cursor's record."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ferryman.errors import NotFoundError

from .seam import Work, first


@dataclass(frozen=True)
class Keyset:
    """Where a page starts and how it is ordered."""

    bound: str
    """A ``WHERE`` addition (`` AND ...``), empty without a cursor."""
    order_by: str
    params: dict[str, Any] = field(default_factory=dict)
    """The bound's parameters."""


def keyset(
    table: str, id_column: str, cursor: str | None, order: str, scope: str = "", **scope_params: str
) -> Work[Keyset]:
    """The page after the cursor's record (``order`` "asc" or "desc"), found within ``scope`` (`` AND ...``).

    Raises:
        NotFoundError: no record (in scope) has the cursor's id.
    """
    sign, direction = ("<", " DESC") if order == "desc" else (">", "")
    order_by = f"created_at{direction}, {id_column}{direction}"
    if cursor is None:
        return Keyset("", order_by)
    row = yield first(
        f"SELECT created_at FROM {table} WHERE {id_column} = :cursor_id{scope}",  # noqa: S608
        cursor_id=cursor,
        **scope_params,
    )
    if row is None:
        raise NotFoundError(f"'{cursor}' not found (the list's 'after' cursor)")
    bound = f" AND (created_at, {id_column}) {sign} (:cursor_at, :cursor_id)"
    return Keyset(bound, order_by, {"cursor_at": row[0], "cursor_id": cursor})
