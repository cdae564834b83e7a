"""The one authorization step of the services: who may do what to which record, and the audit of each denial.

Services take the caller (``who``) explicitly and ask :class:`Access` in one of
three ways, all from the same compiled policy (:func:`~ferryman.auth.filters.compile_filter`):

- :meth:`Access.check` decides in Python, for a record the service already
  read (or a create, before it writes);
- :meth:`Access.guard` makes a :class:`~ferryman.storage.kernel.ops.Check` that
  rides in the storage batch doing the work, so the decision and the write are
  one round trip; :meth:`Access.audited` wraps that batch to audit its denial;
- :meth:`Access.filter` is the filter a list passes to storage, answered by its
  index on owner terms.

A record the caller may not read is missing to it (``NotFoundError``), whatever
the action; one it may read but not act on is a ``ForbiddenError``, and so is a
create the policy forbids. No caller (the server itself) may do anything, and
nothing of it is audited.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from cachetools import LRUCache

from ferryman.auth.audit import audit
from ferryman.auth.filters import compile_filter, owner_of
from ferryman.auth.policy import AccessPolicy, Action
from ferryman.auth.principal import Principal, acting_as
from ferryman.errors import ForbiddenError, NotFoundError
from ferryman.storage.kernel.filters import ALL, Filter, admits
from ferryman.storage.kernel.model import Kind, Owner, Rec, owner_terms
from ferryman.storage.kernel.ops import Check

DEFAULT_CACHE_SIZE = 4096
"""How many compiled filters (one per caller, action and kind) are kept."""

_CacheKey = tuple[str, str, tuple[tuple[str, tuple[str, ...]], ...], str, str]


class Access:
    """The access policy, applied to records by the services.

    Args:
        policy: Who may do what.
        cache_size: How many compiled filters to keep, least recently used dropped first.
    """

    def __init__(self, policy: AccessPolicy, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        if cache_size < 1:
            raise ValueError(f"cache_size must be at least 1, not {cache_size}")
        self._rules = policy.rules
        self._filters: LRUCache[_CacheKey, Filter] = LRUCache(maxsize=cache_size)

    def owner(self, who: Principal | None) -> Owner | None:
        """The owner a record ``who`` creates stores (None: the server itself)."""
        return owner_of(who)

    def filter(self, who: Principal | None, action: Action, kind: Kind | str) -> Filter:
        """The records of ``kind`` on which ``who`` may do ``action`` (what a list passes to storage)."""
        if who is None:
            return ALL
        name = _name(kind)
        # A principal holds a dict of attributes (unhashable); the filter depends on them, so they are in the key.
        attributes = tuple(sorted((category, tuple(values)) for category, values in who.attributes.items()))
        key: _CacheKey = (who.kind.value, who.id, attributes, action, name)
        found = self._filters.get(key)
        if found is None:
            found = self._filters[key] = compile_filter(self._rules, who, action, name)
        return found

    def check(
        self, who: Principal | None, action: Action, kind: Kind | str, record_id: str, owner: Owner | None = None
    ) -> None:
        """Raise unless ``who`` may do ``action`` on the record (its denial audited).

        Args:
            who: The caller (None: the server itself, always allowed).
            action: What it asks to do; ``create`` asks for a record that does not exist yet, owned by ``who``
                (``owner`` is then not read).
            kind: The record's kind (or its name, as the policy writes it).
            record_id: The record's id (a create's new id).
            owner: The record's owner, as stored (None: unowned).

        Raises:
            NotFoundError: ``who`` may not read the record (it looks missing).
            ForbiddenError: it may read it but not do ``action``, or may not create it.
        """
        if who is None:
            return
        if action == "create":
            if not admits(self.filter(who, "create", kind), owner_terms(owner_of(who)), record_id):
                self.denied(who, action, kind, record_id)
                raise ForbiddenError(f"not allowed to create {_noun(kind)} '{record_id}'")
            return
        terms = owner_terms(owner)
        if not admits(self.filter(who, "read", kind), terms, record_id):
            self.denied(who, action, kind, record_id, status=404)
            raise NotFoundError(f"{_noun(kind)} '{record_id}' not found")
        if action != "read" and not admits(self.filter(who, action, kind), terms, record_id):
            self.denied(who, action, kind, record_id)
            raise ForbiddenError(f"not allowed to {action} {_noun(kind)} '{record_id}'")

    def cursor(self, who: Principal | None, kind: Kind, record_id: str, rec: Rec | None) -> None:
        """Raise unless a list's cursor, read as ``rec`` (None: missing), is a record ``who`` may read.

        Raises:
            NotFoundError: it is missing, or ``who`` may not read it (a denial audited, as a read's is).
        """
        if rec is None:
            raise self.missing(who, "read", kind, record_id)
        self.check(who, "read", kind, record_id, rec.owner)

    def missing(self, who: Principal | None, action: Action, kind: Kind, record_id: str) -> NotFoundError:
        """The error of a record that is not there, its denial audited when ``who``'s filter could have hidden it:
        a caller cannot tell another's record from none by the answer, nor an auditor by the trail (a guarded
        write's miss is audited so too, :meth:`audited`)."""
        if self.filter(who, "read", kind) != ALL:
            self.denied(who, action, kind, record_id, status=404)
        return NotFoundError(f"{kind.noun} '{record_id}' not found")

    def guard(
        self, who: Principal | None, action: Action, kind: Kind, record_id: str, parent: str | None = None
    ) -> Check:
        """The check of :meth:`check` as a storage operation, to put first in the batch doing ``action``.

        Storage raises ``NotFoundError`` when the record is missing or unreadable and ``ForbiddenError`` when
        ``action`` is not allowed; run the batch inside :meth:`audited` so a denial is audited.

        Args:
            who: The caller (None: the server itself; the check then only requires the record to exist).
            action: What the batch does to the record (not ``create``: a record to create does not exist yet;
                use :meth:`check` before writing it).
            kind: The record's kind.
            record_id: The record's id.
            parent: When given, the record must also belong to this parent.

        Raises:
            ValueError: ``action`` is ``create``.
        """
        if action == "create":
            raise ValueError("a create is checked with Access.check before its Put, not guarded")
        read = self.filter(who, "read", kind)
        act = ALL if action == "read" else self.filter(who, action, kind)
        return Check(kind, record_id, read=read, act=act, parent=parent)

    @contextmanager
    def audited(self, who: Principal | None, action: Action, kind: Kind, record_id: str) -> Iterator[None]:
        """Audit the denial of a batch holding :meth:`guard`'s check of this record, then let it propagate.

        Storage does not say whether a record it reports missing exists: one the caller's filter could exclude
        is audited as denied either way (as a check on a record without an owner was), one no filter excludes
        (the caller may read every record) is not.
        """
        try:
            yield
        except ForbiddenError:
            if action != "read" and self.filter(who, action, kind) != ALL:
                self.denied(who, action, kind, record_id)
            raise
        except NotFoundError as exc:
            # The guard's own error, not another operation's (a missing parent of a Put names its own record).
            if str(exc) == f"{kind.noun} '{record_id}' not found" and self.filter(who, "read", kind) != ALL:
                self.denied(who, action, kind, record_id, status=404)
            raise

    def denied(
        self, who: Principal | None, action: Action, kind: Kind | str, record_id: str, *, status: int = 403
    ) -> None:
        """Audit a denial (``denied``) of ``action`` on a record by ``who`` (none for the server itself).

        ``status`` is what the caller is answered: 403, or 404 for a record it may not read.
        """
        self._audit(who, "denied", action, kind, record_id, status)

    def record(
        self, who: Principal | None, event: Literal["create", "delete"], kind: Kind | str, record_id: str
    ) -> None:
        """Audit a record's creation or deletion by ``who`` (none for the server itself)."""
        self._audit(who, event, event, kind, record_id)

    def _audit(
        self,
        who: Principal | None,
        event: str,
        action: Action,
        kind: Kind | str,
        record_id: str,
        status: int | None = None,
    ) -> None:
        if who is None:
            return
        # The audit record names the current principal: make it the caller the service was given.
        with acting_as(who):
            audit(event, action, f"{_name(kind)}::{record_id}", status=status)


def _name(kind: Kind | str) -> str:
    return kind if isinstance(kind, str) else kind.name


def _noun(kind: Kind | str) -> str:
    return kind.replace("_", " ") if isinstance(kind, str) else kind.noun
