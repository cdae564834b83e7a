"""Typed principals: an owner is ``(kind, id)``, an API key's or an identity provider's subject's.

Earlier versions told the two apart by the id alone: ``key:NAME`` was the API
key ``NAME``, anything else a token's subject, so a token whose ``sub`` was
``key:NAME`` acted as that key. Owners now store their kind in the JSON
(``{"kind": "api_key", "id": "NAME", ...}``) and their qualified name in the
``principal`` column (``key:NAME`` or ``sub:ID``); idempotency keys are owned
by the qualified name too (an API key's is unchanged).

Going down, a subject whose id starts with ``key:`` loses its records'
ownership (they become unowned) and its idempotency keys: the earlier form
would hand them to the API key of that name.

Revision ID: 0010_typed_principals
Revises: 0009_blocked_text
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0010_typed_principals"
down_revision = "0009_blocked_text"
branch_labels = None
depends_on = None

_BATCH = 1000
# A migration keeps its own copy of the forms it converts: the application's may change later.
_PREFIXES = {"api_key": "key:", "subject": "sub:"}
_LEGACY_KEY = "key:"

Change = dict[str, Any] | None
"""A row's new ``principal`` and ``owner`` (``{"principal": …, "owner": …}``); None: delete the row."""


def _typed(owner: dict[str, Any]) -> Change:
    if "kind" in owner:
        return {}
    old: str = owner["id"]
    kind, new_id = ("api_key", old.removeprefix(_LEGACY_KEY)) if old.startswith(_LEGACY_KEY) else ("subject", old)
    typed = {"kind": kind, "id": new_id, "attributes": owner.get("attributes", {})}
    return {"principal": _PREFIXES[kind] + new_id, "owner": json.dumps(typed)}


def _untyped(owner: dict[str, Any]) -> Change:
    if "kind" not in owner:
        return {}
    kind, new_id = owner["kind"], owner["id"]
    if kind == "subject" and new_id.startswith(_LEGACY_KEY):
        return None
    old = _LEGACY_KEY + new_id if kind == "api_key" else new_id
    return {"principal": old, "owner": json.dumps({"id": old, "attributes": owner.get("attributes", {})})}


def _rewrite_owners(convert: Callable[[dict[str, Any]], Change]) -> None:
    """Convert every row of ``record_owners``, a batch at a time in key order."""
    bind = op.get_bind()
    select = sa.text(
        "SELECT kind, record_id, owner FROM record_owners "  # noqa: S608
        "WHERE kind > :kind OR (kind = :kind AND record_id > :record_id) "
        f"ORDER BY kind, record_id LIMIT {_BATCH}"
    )
    update = sa.text(
        "UPDATE record_owners SET principal = :principal, owner = :owner WHERE kind = :kind AND record_id = :record_id"
    )
    delete = sa.text("DELETE FROM record_owners WHERE kind = :kind AND record_id = :record_id")
    after = {"kind": "", "record_id": ""}
    while found := bind.execute(select, after).all():
        updates, deletes = [], []
        for kind, record_id, owner in found:
            change = convert(json.loads(owner))
            row = {"kind": kind, "record_id": record_id}
            if change is None:
                deletes.append(row)
            elif change:
                updates.append(row | change)
        if updates:
            bind.execute(update, updates)
        if deletes:
            bind.execute(delete, deletes)
        after = {"kind": found[-1][0], "record_id": found[-1][1]}


def _rename_idempotency_owners(where: str, rename: str, order: str) -> None:
    """Rename the owners ``where`` selects one row at a time, in ``order`` of their length.

    One ``UPDATE`` of them all could fail midway: ``bob -> sub:bob`` meets the row of
    a subject called ``sub:bob`` before that one became ``sub:sub:bob``, and the
    primary key is checked row by row. Longest first when names grow (shortest
    first when they shrink), the name each row takes is free by then.
    """
    bind = op.get_bind()
    found = bind.execute(
        sa.text(f"SELECT owner, idempotency_key FROM idempotency_keys WHERE {where} ORDER BY length(owner) {order}")  # noqa: S608
    ).all()
    if found:
        bind.execute(
            sa.text(f"UPDATE idempotency_keys SET owner = {rename} WHERE owner = :owner AND idempotency_key = :key"),  # noqa: S608
            [{"owner": owner, "key": key} for owner, key in found],
        )


def upgrade() -> None:
    """Give every owner its kind; idempotency keys of subjects get the ``sub:`` prefix."""
    _rewrite_owners(_typed)
    _rename_idempotency_owners("owner <> '' AND substr(owner, 1, 4) <> 'key:'", "'sub:' || owner", "DESC")


def downgrade() -> None:
    """Owners and idempotency keys as the earlier versions named them (see the module's note on ``key:``)."""
    _rewrite_owners(_untyped)
    op.execute("DELETE FROM idempotency_keys WHERE substr(owner, 1, 8) = 'sub:key:'")
    _rename_idempotency_owners("substr(owner, 1, 4) = 'sub:'", "substr(owner, 5)", "ASC")
