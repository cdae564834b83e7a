"""The Redis kernel's key layout, and the names it can hold.

Every key is ``<prefix><tag>:...``; the scripts' library (``lua/lib.lua``)
builds them, the Python side never does. A kind's or channel's name is a key's
middle part and may not hold ``:``; any other middle part (a parent id, an
owner key) is written ``<length>:<text>``, and the last part is whatever id it
is, so no id can make two keys collide.

==============================  ===========  ===============================================================
key                             type         holds
==============================  ===========  ===============================================================
``seq``                         string       the global creation counter (INCR)
``r:<kind>:<id>``               hash         ``seq parent at terms owner status lease k1 k2 k3``, and one
                                             ``b:<field>`` per top-level body field (its JSON text)
``a:<kind>``                    sorted set   every id of the kind, by seq
``c:<kind>:<parent>``           sorted set   the kind's ids under one parent ("" for roots), by seq
``t:<kind>:<term>``             sorted set   the ids of the kind whose owner terms hold ``term``, by seq
``tp:<kind>:<n:parent>:<term>`` sorted set   the same, under one parent
``i:<kind>:<slot>:<value>``     sorted set   the ids whose declared index ``slot`` (1-3) is ``value``, by seq
``x:<kind>:<parent>``           string       the id holding the parent's exclusive status, if any
``lease:<kind>``                sorted set   the ids of leased records, by lease end
``l:<kind>:<channel>:<id>``     list         a record's log, entry ``n`` at index ``n``
==============================  ===========  ===============================================================
"""

from __future__ import annotations

from ferryman.storage.kernel.model import Schema

DEFAULT_PREFIX = "fk:"


def check_names(schema: Schema) -> None:
    """Refuse a schema whose kind or channel names could make two keys collide.

    Raises:
        ValueError: a kind or log channel name is empty or holds ``:``.
    """
    for kind in schema.kinds.values():
        for name in (kind.name, *kind.logs):
            if not name or ":" in name:
                raise ValueError(f"the Redis kernel cannot store kind {kind.name!r}: {name!r} is empty or holds ':'")


def pattern(prefix: str) -> str:
    """A ``SCAN MATCH`` pattern for every key under ``prefix`` (its glob characters escaped)."""
    escaped = "".join(f"\\{char}" if char in "*?[]\\" else char for char in prefix)
    return f"{escaped}*"
