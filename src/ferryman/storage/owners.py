"""An owner as stored: a principal's kind, id and attributes, as JSON (the same text on every backend)."""

from __future__ import annotations

import json

from ferryman.auth.principal import Principal, PrincipalKind

LEGACY_KEY_PREFIX = "key:"
"""How an API key's principal id began before principals were typed (anything else was a token's subject)."""


def dump_owner(owner: Principal) -> str:
    """The stored form of an owner."""
    attributes = {k: list(v) for k, v in owner.attributes.items()}
    return json.dumps({"kind": owner.kind.value, "id": owner.id, "attributes": attributes})


def load_owner(text: str) -> Principal:
    """An owner from its stored form.

    Raises:
        KeyError: the form has no kind (data from before typed principals that no upgrade converted).
    """
    data = json.loads(text)
    return Principal(PrincipalKind(data["kind"]), data["id"], {k: tuple(v) for k, v in data["attributes"].items()})


def legacy_principal(old_id: str) -> Principal:
    """The principal an id stored before principals were typed named: ``key:NAME`` an API key, else a subject."""
    if old_id.startswith(LEGACY_KEY_PREFIX):
        return Principal(PrincipalKind.API_KEY, old_id.removeprefix(LEGACY_KEY_PREFIX))
    return Principal(PrincipalKind.SUBJECT, old_id)


def typed_owner(text: str) -> str:
    """An owner stored before principals were typed, in the stored form of today (one already typed: unchanged)."""
    data = json.loads(text)
    if "kind" in data:
        return text
    old = legacy_principal(data["id"])
    return dump_owner(Principal(old.kind, old.id, {k: tuple(v) for k, v in data.get("attributes", {}).items()}))
