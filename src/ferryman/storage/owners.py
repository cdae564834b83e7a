"""An owner as stored: a principal's id and attributes, as JSON (the same text on every backend)."""

from __future__ import annotations

import json

from ferryman.auth.principal import Principal


def dump_owner(owner: Principal) -> str:
    """The stored form of an owner."""
    return json.dumps({"id": owner.id, "attributes": {k: list(v) for k, v in owner.attributes.items()}})


def load_owner(text: str) -> Principal:
    """An owner from its stored form."""
    data = json.loads(text)
    return Principal(data["id"], {k: tuple(v) for k, v in data.get("attributes", {}).items()})
