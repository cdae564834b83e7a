"""Every kind of record the kernel stores: the whole schema, as declarations.

A new kind is one :class:`~ferryman.storage.kernel.model.Kind` here, listed in
:data:`SCHEMA`, and a :class:`~ferryman.storage.domain.records.Records` over it;
no backend changes.
"""

from __future__ import annotations

from ..kernel.model import Kind, Schema

MODEL = Kind("model")
"""A model registered at run time (``POST /v1/models``); its id is the caller's identifier."""
TOOLGROUP = Kind("toolgroup")
"""A toolgroup registered at run time (an MCP server)."""
SHIELD = Kind("shield")
"""A shield registered at run time."""
API_KEY = Kind("api_key", noun="API key", indexes=("key_hash",))
"""An API key, by its name; found by the hash of the key on every request."""
USAGE = Kind("usage")
"""The tokens one run of a turn or response used, owned by its caller (a root: it outlives its agent)."""

AUDIT = Kind("audit", noun="audit record", indexes=("principal", "resource", "outcome"))
"""An audit record (a create, a delete, a denial), owned by whoever acted; listed by its most selective fields."""

SCHEMA = Schema([MODEL, TOOLGROUP, SHIELD, API_KEY, USAGE, AUDIT])
"""The kinds every backend's kernel stores."""
