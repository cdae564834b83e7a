"""The access step for the records runs make: sessions, turns, responses and conversations' items.

A service asks :class:`RecordGuard` before it touches one of these records
through the storage backend, naming the caller (``who``) and the action. Each
record's owner is stored with it (a session's, conversation's or response's in
its kernel record, a turn's in its own row or hash: :func:`owners_of`), written
by the create that made it: the service gets that owner from :meth:`creating`
and hands it to the backend's create, then reports it with :meth:`created`.

The owners of sessions and turns are kept in memory once read or created:
their ids are made by the server, never reused, and their owner never changes,
so a kept owner stays true (one of a deleted record only lets a call on to the
backend, which finds the record missing). Checking a turn, then its session,
then the turn again in one request reads storage once at most.

Child records follow their parent: a turn's steps and events are checked on
the turn or its session, items on their conversation or response.
"""

from __future__ import annotations

from cachetools import LRUCache

from ferryman.auth.policy import Action
from ferryman.auth.principal import Principal
from ferryman.storage.base import ResponseStart, Store
from ferryman.storage.domain.kinds import CONVERSATION, RESPONSE, SESSION
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner

from .access import Access
from .acting_owner import stored_principal

KEPT_OWNERS = 10_000
"""How many owners of sessions and turns a guard keeps in memory."""
_RECORD_OWNED = {kind.name: kind for kind in (CONVERSATION, SESSION, RESPONSE)}
"""Kinds whose owner is stored in their kernel record; a turn's is stored in its own row or hash."""
_FIXED_OWNERS = frozenset({"session", "turn"})
"""Kinds whose ids the server makes, never reused, and whose owner is stored once, with the record."""

Record = tuple[str, str]
"""A record's kind (``session``, ``turn``, ``response``, ``conversation``) and id."""


class RecordGuard:
    """The access policy applied to the records of runs, their owners read once and kept.

    Args:
        store: Where the records and their owners are stored.
        access: The access policy.
        kept: How many owners of sessions and turns to keep in memory.
    """

    def __init__(self, store: Store, access: Access, kept: int = KEPT_OWNERS) -> None:
        self.access = access
        self._store = store
        self._kept: LRUCache[Record, Owner] = LRUCache(maxsize=kept)

    async def owner(self, kind: str, record_id: str) -> Owner | None:
        """The stored owner of a record (None: unowned, or missing)."""
        owner = self._kept.get((kind, record_id))
        if owner is not None:
            return owner
        owner = (await owners_of(self._store, kind, [record_id])).get(record_id)
        if owner is not None:
            self._keep((kind, record_id), owner)
        return owner

    async def principal(self, kind: str, record_id: str) -> Principal | None:
        """The stored owner of a record as the principal it was (None: unowned, or missing)."""
        return stored_principal(await self.owner(kind, record_id))

    async def check(self, who: Principal | None, action: Action, kind: str, record_id: str) -> None:
        """Raise unless ``who`` may do ``action`` on the record (its denial audited); the server (None) may do
        anything, and its calls read nothing.

        Raises:
            NotFoundError: ``who`` may not read the record (it looks missing).
            ForbiddenError: it may read it but not do ``action``.
        """
        if who is not None:
            self.access.check(who, action, kind, record_id, await self.owner(kind, record_id))

    def creating(self, who: Principal | None, *records: Record) -> Owner | None:
        """The owner to store with the records ``who`` is about to create, once it may create each.

        Raises:
            ForbiddenError: the policy does not let ``who`` create one of them (its denial audited).
        """
        for kind, record_id in records:
            self.access.check(who, "create", kind, record_id)
        return self.access.owner(who)

    async def starting(self, who: Principal | None, start: ResponseStart) -> tuple[Owner | None, list[Record]]:
        """The owner to store with a response's start, and the records it creates (its new session, if any, its
        turn and the response), once ``who`` may create each and update the session it runs in (a new one is
        judged as ``who``'s own, unread).

        Raises:
            NotFoundError: ``who`` may not read the (existing) session.
            ForbiddenError: it may not update the session, or not create one of the records.
        """
        made = [("turn", start.turn.turn_id), ("response", start.record.response.id)]
        session_id = start.record.session_id
        if start.session is not None:
            made.insert(0, ("session", start.session.session_id))
            self.access.check(who, "update", "session", session_id, self.access.owner(who))
        else:
            await self.check(who, "update", "session", session_id)
        return self.creating(who, *made), made

    def created(self, who: Principal | None, *records: Record) -> None:
        """Keep the owner of records ``who`` created, and audit their creation."""
        owner = self.access.owner(who)
        for record in records:
            if owner is not None:
                self._keep(record, owner)
            self.access.record(who, "create", *record)

    def deleted(self, who: Principal | None, kind: str, record_id: str) -> None:
        """Forget a deleted record's owner, and audit its deletion."""
        self._kept.pop((kind, record_id), None)
        self.access.record(who, "delete", kind, record_id)

    def _keep(self, record: Record, owner: Owner) -> None:
        if record[0] in _FIXED_OWNERS:
            self._kept[record] = owner


async def owners_of(store: Store, kind: str, record_ids: list[str]) -> dict[str, Owner]:
    """The owners of those of these records (a session, conversation, response or turn) that have one, as each
    kind stores them: in its kernel record, or a turn's in its own row or hash.

    Raises:
        KeyError: records of ``kind`` have no owner.
    """
    if kind == "turn":
        return await store.turn_owners(record_ids)
    record_kind = _RECORD_OWNED[kind]
    if not record_ids:
        return {}
    (found,) = await store.kernel.read([ops.GetMany(record_kind, tuple(dict.fromkeys(record_ids)))])
    return {rec.id: rec.owner for rec in found if rec.owner is not None}
