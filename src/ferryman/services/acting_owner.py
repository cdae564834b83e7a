"""Who work done later for a record's owner, with no caller of the owner's there, acts as: a schedule's runs, and
the continuation of a run whose held call another caller decided.

The owner stored with a record holds its attributes as they were when it was made. An API key's are read again
(a revoked or deleted key acts no more). A signed-in subject's are known only to its identity provider, so the
snapshot is acted with only for ``schedules.subject_lifetime_seconds`` after it was taken; after that, the
subject must act itself (with the attributes it has then). Work done with a snapshot that stores a record of
its own (a response continuing another) keeps the time the snapshot was taken in its turn's ``overrides``
(:func:`keep_since`), so that the bound is not restarted by the record it makes.
"""

from __future__ import annotations

from typing import Any

from ferryman.auth.principal import Principal, PrincipalKind
from ferryman.errors import ForbiddenError
from ferryman.storage.domain.kinds import API_KEY
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.ops import Get
from ferryman.storage.kernel.protocol import Kernel

LIFETIME_SETTING = "schedules.subject_lifetime_seconds"
"""The setting that bounds how long a subject's stored attributes are acted with."""
SINCE_KEY = "acting_since"
"""Where a turn's ``overrides`` keep when the stored attributes its run acts with were taken."""


def keep_since(overrides: dict[str, Any], since: float | None) -> dict[str, Any]:
    """``overrides`` keeping ``since``, when the run acts with stored attributes taken then (None: unchanged)."""
    return overrides if since is None else {**overrides, SINCE_KEY: since}


def kept_since(overrides: dict[str, Any]) -> float | None:
    """When the stored attributes a turn's run acts with were taken (None: when the turn started)."""
    found = overrides.get(SINCE_KEY)
    return float(found) if isinstance(found, int | float) and not isinstance(found, bool) else None


def acts_for_a_while(owner: Owner | None) -> bool:
    """Whether ``owner``'s stored attributes are acted with only for a while: a subject's, a snapshot (an API
    key's are read again each time; the server's never change)."""
    return owner is not None and owner.kind == PrincipalKind.SUBJECT.value


def stale(owner: Owner | None, until: float, now: float) -> bool:
    """Whether ``owner``'s stored attributes, good ``until`` (seconds since the epoch), may no longer be acted
    with at ``now``."""
    return acts_for_a_while(owner) and now >= until


def stored_principal(owner: Owner | None) -> Principal | None:
    """The owner as stored, as a principal (None: the server), with the attributes it had then."""
    return None if owner is None else Principal(PrincipalKind(owner.kind), owner.id, dict(owner.attributes))


async def owner_now(kernel: Kernel, owner: Owner | None) -> Principal | None:
    """Who work for ``owner`` acts as now: an API key with its attributes now, any other owner as stored (check
    :func:`stale` first), None for the server.

    Raises:
        ForbiddenError: the owner is an API key that was revoked or deleted.
    """
    if owner is None or owner.kind != PrincipalKind.API_KEY.value:
        return stored_principal(owner)
    (key,) = await kernel.read([Get(API_KEY, owner.id)])
    if key is None or key.body.get("revoked_at") is not None:
        raise ForbiddenError(f"the owner, API key '{owner.id}', is revoked")
    attributes = {str(kind): tuple(str(v) for v in values) for kind, values in key.body["attributes"].items()}
    return Principal(PrincipalKind.API_KEY, owner.id, attributes)
