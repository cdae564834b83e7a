"""An owner as stored: its kind, id and attributes, as JSON (the same text on every backend).

Storage keeps an owner as a plain :class:`~.kernel.model.Owner`; the services turn a caller into one and back.
"""

from __future__ import annotations

import json

from ferryman.storage.kernel.model import Owner

LEGACY_KEY_PREFIX = "key:"
"""How an API key's principal id began before principals were typed (anything else was a token's subject)."""
_API_KEY = "api_key"
_SUBJECT = "subject"


def dump_owner(owner: Owner) -> str:
    """The stored form of an owner."""
    return json.dumps(owner.to_json())


def load_owner(text: str) -> Owner:
    """An owner from its stored form.

    Raises:
        KeyError: the form has no kind (data from before typed principals that no upgrade converted).
    """
    data = json.loads(text)
    return Owner(data["kind"], data["id"], {k: tuple(v) for k, v in data["attributes"].items()})


def legacy_owner(old_id: str) -> Owner:
    """The owner an id stored before principals were typed named: ``key:NAME`` an API key, else a subject."""
    if old_id.startswith(LEGACY_KEY_PREFIX):
        return Owner(_API_KEY, old_id.removeprefix(LEGACY_KEY_PREFIX))
    return Owner(_SUBJECT, old_id)


def typed_owner(text: str) -> str:
    """An owner stored before principals were typed, in the stored form of today (one already typed: unchanged)."""
    data = json.loads(text)
    if "kind" in data:
        return text
    old = legacy_owner(data["id"])
    return dump_owner(Owner(old.kind, old.id, {k: tuple(v) for k, v in data.get("attributes", {}).items()}))
