"""Owners and the access policy, enforced once over every backend: :func:`owned` wraps a :class:`Store`.

Every method of the storage protocol has an entry in :data:`RULES` saying what
it does to which record: creates stamp the caller (``current_principal``) as
the record's owner, which its backend writes with the record in the same
transaction (a session's or response's kernel record, a turn's own row or
hash); reads, updates and deletes check the policy against that owner;
the lists left here keep only what the caller may read. A record the caller
may not read is reported missing
(``NotFoundError``), whatever the call; one it may read but not change is a
``ForbiddenError`` (403), and so is a create the policy forbids (Llama Stack's
answer). Child records follow their parent: a session's turns, steps and
events are checked on the session (or on the turn, which is owned like its
session), items on their conversation or response.

A new kind of record belongs on the kernel, which stores its owner in the record
(:mod:`ferryman.storage.domain`); a backend method that creates one gets a
:class:`Create` entry (and takes ``owner=``), its other methods an entry each. The module refuses
to load while a protocol method has no entry, so a new method cannot be left
unchecked. No principal (the server itself, or no authentication) skips every
check and stamps nothing. Storage keeps an owner as a plain value
(:class:`~ferryman.storage.kernel.model.Owner`): the caller is turned into one
here, and an owner read back into the principal the policy judges.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from cachetools import LRUCache

from ferryman.api.agents import Turn
from ferryman.auth.audit import audit
from ferryman.auth.filters import owner_of as stored_owner
from ferryman.auth.policy import AccessPolicy, Action
from ferryman.auth.principal import Principal, current_principal
from ferryman.errors import ForbiddenError, NotFoundError
from ferryman.storage.base import Store
from ferryman.storage.domain.kinds import CONVERSATION, RESPONSE, SESSION
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner

from .acting_owner import stored_principal

Args = dict[str, Any]
Target = Callable[[Args], "tuple[str, str] | None"]
"""The ``(kind, id)`` of the record a call touches, from its arguments by name (None: no record)."""

_KEPT_OWNERS = 10_000
"""How many owners of records whose owner never changes (:data:`_FIXED_OWNERS`) a store keeps in memory."""
_RECORD_OWNED = {kind.name: kind for kind in (CONVERSATION, SESSION, RESPONSE)}
"""Kinds whose owner is stored in their kernel record (their other calls are still checked here); a turn's is
stored in its own row or hash (:meth:`Store.turn_owners`)."""
_FIXED_OWNERS = frozenset({"session", "turn"})
"""Kinds whose ids the server makes, never reused, and whose owner is stamped once: a kept owner stays true (a
deleted record's kept owner only lets a call on to the backend, which finds the record missing)."""


def _arg(kind: str, name: str, attr: str | None = None) -> Target:
    def target(args: Args) -> tuple[str, str] | None:
        value = args[name] if attr is None else getattr(args[name], attr)
        return None if value is None else (kind, value)

    return target


def _items_parent(args: Args) -> tuple[str, str]:
    owner: str = args["owner"]
    return ("conversation", owner) if owner.startswith("conv_") else ("response", owner)


def _response_of(args: Args) -> tuple[str, str]:
    return "response", args["record"].response.id


def _started_response(args: Args) -> tuple[str, str]:
    return "response", args["start"].record.response.id


def _started_in(args: Args) -> tuple[str, str]:
    return "session", args["start"].record.session_id


def _started_turn(args: Args) -> tuple[str, str]:
    return "turn", args["start"].turn.turn_id


def _opened_session(args: Args) -> tuple[str, str] | None:
    session = args["start"].session
    return None if session is None else ("session", session.session_id)


@dataclass(frozen=True)
class Act:
    """The call reads, updates or deletes the record ``target`` names (delete: its stored owner goes with it); with
    ``also``, the caller must be allowed the same on that record too (a read of both a turn and its session)."""

    action: Action
    target: Target
    also: Target | None = None


@dataclass(frozen=True)
class Create:
    """The call creates the record ``target`` names, under ``parent`` (checked for ``parent_action``); the
    backend's method takes the owner (``owner=``) and stores it with the record, in one transaction."""

    target: Target
    parent: Target | None = None
    parent_action: Action = "read"
    along: tuple[Target, ...] = ()
    """Records the call creates before ``target``, in the same transaction with the same owner, each checked,
    kept and audited as ``target`` is (None: not this time). A parent among them is judged as owned by the
    caller, unread."""


@dataclass(frozen=True)
class Server:
    """Server machinery (leases, sweeps, keys scoped by caller already, owners): passed through."""


@dataclass(frozen=True)
class Listing:
    """A list, filtered by :class:`OwnedStore`'s method of the same name."""


@dataclass(frozen=True)
class Beneath:
    """Checked by its service against the owner its kernel record holds (a vector store's): the service calls it
    on the backend (:func:`beneath`), and through this proxy it does not exist, so no call can skip the check."""


Rule = Act | Create | Server | Listing | Beneath

_session = _arg("session", "session_id")
_turn = _arg("turn", "turn_id")
_response = _arg("response", "response_id")

RULES: dict[str, Rule] = {
    # A session's agent is a kernel record: the service checks the caller may read it (services/agent_records.py).
    # Its own record is read and listed through the kernel (services/session_reads.py); its owner, stamped here,
    # is stored in that record.
    "create_session": Create(_arg("session", "session", "session_id")),
    "delete_session": Act("delete", _session),
    "start_turn": Create(_arg("turn", "record", "turn_id"), _arg("session", "record", "session_id"), "update"),  # noqa: E501
    "claim_resume": Act("update", _session),
    "resume_point": Act("read", _session, also=_turn),
    "save_step": Act("update", _turn),
    "redact_turn_input": Act("update", _turn),
    "finish_turn": Act("update", _arg("turn", "record", "turn_id")),
    "delete_turn": Act("delete", _turn),
    "get_turn_record": Act("read", _session),
    "session_queue": Act("read", _session),
    "pending_step": Act("read", _turn),
    "load_history": Act("read", _session),
    "turn_messages": Act("read", _session),
    "list_turns": Listing(),
    "get_step": Act("read", _session),
    "renew_leases": Server(),
    "fail_expired_turns": Server(),
    "save_turn_events": Act("update", _turn),
    "turn_events_after": Act("read", _turn),
    "turn_event_count": Act("read", _turn),
    # A conversation is a kernel record: its services check its create and delete (ConversationForks.create,
    # ConversationService.delete, through checked_records.py).
    "create_conversation": Beneath(),
    "delete_conversation": Beneath(),
    "add_items": Act("update", _items_parent),
    "replace_items": Act("update", _items_parent),
    "list_items": Act("read", _items_parent),
    "all_items": Act("read", _items_parent),
    "get_item": Act("read", _items_parent),
    "delete_item": Act("update", _items_parent),
    "start_response": Create(_started_response, _started_in, "update", along=(_opened_session, _started_turn)),  # noqa: E501
    "finish_response": Act("update", _response_of),
    "get_response": Act("read", _response),
    "responses_by_id": Beneath(),  # a page of the responses' records, filtered by ResponseReads.list
    "items_of": Beneath(),  # the input items of that page
    "turn_response": Act("read", _session),
    "delete_response": Act("delete", _response),
    "events_after": Act("read", _response),
    "chain_history": Act("read", _response),
    "forget_file": Server(),  # FileService checks the file's deletion against its kernel record first
    "create_vector_store": Beneath(),
    "delete_vector_store": Beneath(),
    "file_counts": Beneath(),
    "add_vector_store_files": Beneath(),
    "get_vector_store_file": Beneath(),
    "list_vector_store_files": Beneath(),
    "all_vector_store_files": Beneath(),
    "vector_store_files": Beneath(),
    "store_files": Beneath(),
    "update_vector_store_file": Beneath(),
    "delete_vector_store_file": Beneath(),
    "create_file_batch": Beneath(),
    "get_file_batch": Beneath(),
    "cancel_file_batch": Beneath(),
    "claim_ingestion": Server(),
    "renew_ingestion": Server(),
    "finish_ingestion": Server(),
    "ingestion_backlog": Server(),
    "add_chunks": Beneath(),
    "list_chunks": Beneath(),
    "keyword_search": Beneath(),
    "vector_search": Beneath(),
    "write_keyed": Beneath(),  # a create answered with its record: its service stamps and checks the owner
    "claim_idempotency_key": Server(),
    "renew_idempotency_key": Server(),
    "complete_idempotency_key": Server(),
    "release_idempotency_key": Server(),
    "forget_idempotency_key": Server(),
    "turn_owners": Server(),
    "open": Server(),
    "close": Server(),
}  # fmt: skip
"""What each storage method does to which record; every method of :class:`Store` has one."""


def _protocol_methods() -> set[str]:
    return {name for name, value in inspect.getmembers(Store, inspect.isfunction) if not name.startswith("_")}


_UNCHECKED = _protocol_methods() ^ set(RULES)
if _UNCHECKED:  # a storage method without an access rule would be a hole in every backend
    raise TypeError(f"storage methods without an access rule (or rules without a method): {sorted(_UNCHECKED)}")


def _resource(kind: str, record_id: str) -> str:
    return f"{kind}::{record_id}"


class OwnedStore:
    """A store whose records are owned by their creators and guarded by an access policy.

    Args:
        inner: The backend.
        policy: Who may do what.
    """

    def __init__(self, inner: Store, policy: AccessPolicy) -> None:
        self.inner = inner
        self.policy = policy
        self.kernel = inner.kernel
        self._signatures = {name: inspect.signature(getattr(Store, name)) for name in RULES}
        self._kept: LRUCache[tuple[str, str], Principal] = LRUCache(maxsize=_KEPT_OWNERS)

    def __getattr__(self, name: str) -> Any:
        rule = RULES.get(name)
        if rule is None or isinstance(rule, Listing | Beneath):
            raise AttributeError(name)
        method = getattr(self.inner, name)
        if isinstance(rule, Server):
            return method
        signature = self._signatures[name]

        async def guarded(*args: Any, **kwargs: Any) -> Any:
            user = current_principal.get()
            if user is None:
                return await method(*args, **kwargs)
            bound = signature.bind(None, *args, **kwargs).arguments
            if isinstance(rule, Create):
                return await self._create(user, rule, bound, method, args, kwargs)
            target = rule.target(bound)
            for checked in (target, rule.also(bound) if rule.also is not None else None):
                if checked is not None:
                    await self.check(rule.action, *checked)
            result = await method(*args, **kwargs)
            if rule.action == "delete" and target is not None and result is not False:
                self._kept.pop(target, None)  # its stored owner went with it
                audit("delete", "delete", _resource(*target))
            return result

        return guarded

    async def owner_of(self, kind: str, record_id: str) -> Principal | None:
        """The owner of a record (None: unowned)."""
        kept = self._kept.get((kind, record_id))
        if kept is not None:
            return kept
        owner = stored_principal((await self.owners_of(kind, [record_id])).get(record_id))
        if owner is not None:
            self._keep(kind, record_id, owner)
        return owner

    async def owners_of(self, kind: str, record_ids: list[str]) -> dict[str, Owner]:
        """The owners of those of these records that have one (see :func:`owners_of`)."""
        return await owners_of(self.inner, kind, record_ids)

    def _keep(self, kind: str, record_id: str, owner: Principal) -> None:
        if kind in _FIXED_OWNERS:
            self._kept[kind, record_id] = owner

    async def check(self, action: Action, kind: str, record_id: str) -> None:
        """Raise unless the current principal may do ``action`` on the record.

        Raises:
            NotFoundError: it may not read it (the record looks missing).
            ForbiddenError: it may read it but not do ``action``.
        """
        user = current_principal.get()
        if user is None:
            return
        self._judge(user, action, kind, record_id, await self.owner_of(kind, record_id))

    def _judge(self, user: Principal, action: Action, kind: str, record_id: str, owner: Principal | None) -> None:
        """Raise unless ``user`` may do ``action`` on the record owned by ``owner`` (see :meth:`check`)."""
        resource = _resource(kind, record_id)
        if not self.policy.allows(user, "read", resource, owner):
            audit("denied", action, resource, status=404)
            raise NotFoundError(f"{kind} '{record_id}' not found")
        if action != "read" and not self.policy.allows(user, action, resource, owner):
            audit("denied", action, resource, status=403)
            raise ForbiddenError(f"not allowed to {action} {kind} '{record_id}'")

    async def _create(
        self, user: Principal, rule: Create, bound: Args, method: Callable[..., Any], args: Any, kwargs: Any
    ) -> Any:
        target = rule.target(bound)
        assert target is not None
        created = [made for made in (along(bound) for along in rule.along) if made is not None] + [target]
        parent = rule.parent(bound) if rule.parent is not None else None
        if parent in created:  # created by this call too: the caller will own it
            self._judge(user, rule.parent_action, *parent, user)
        elif parent is not None:
            await self.check(rule.parent_action, *parent)
        for kind, record_id in created:
            if not self.policy.allows(user, "create", _resource(kind, record_id), user):
                audit("denied", "create", _resource(kind, record_id), status=403)
                raise ForbiddenError(f"not allowed to create {kind} '{record_id}'")
        owner = stored_owner(user)
        assert owner is not None
        result = await method(*args, **kwargs, owner=owner)
        for made in created:
            self._keep(*made, user)
            audit("create", "create", _resource(*made))
        return result

    async def _readable(self, kind: str, ids: list[str]) -> set[str]:
        user = current_principal.get()
        if user is None:
            return set(ids)
        owners = await self.owners_of(kind, ids)
        return {i for i in ids if self.policy.allows(user, "read", _resource(kind, i), stored_principal(owners.get(i)))}

    async def list_turns(self, session_ids: list[str], turn_ids: list[str] | None = None) -> list[Turn]:
        """Full turns of those of the sessions that are readable."""
        readable = await self._readable("session", session_ids)
        return await self.inner.list_turns([s for s in session_ids if s in readable], turn_ids)


async def owners_of(store: Store, kind: str, record_ids: list[str]) -> dict[str, Owner]:
    """The owners of those of these records (a session, conversation, response or turn) that have one, as each
    kind stores them: in its kernel record, or a turn's in its own row or hash.

    Raises:
        KeyError: records of ``kind`` have no owner.
    """
    store = beneath(store)
    if kind == "turn":
        return await store.turn_owners(record_ids)
    record_kind = _RECORD_OWNED[kind]
    if not record_ids:
        return {}
    (found,) = await store.kernel.read([ops.GetMany(record_kind, tuple(dict.fromkeys(record_ids)))])
    return {rec.id: rec.owner for rec in found if rec.owner is not None}


async def authorize(store: Store, action: Action, kind: str, record_id: str) -> None:
    """Check the caller may do ``action`` on a record before a side effect outside storage (stopping its runs).

    A store without owners (no access control wired) allows everything.

    Raises:
        NotFoundError: the caller may not read the record.
        ForbiddenError: it may read it but not do ``action``.
    """
    if isinstance(store, OwnedStore):
        await store.check(action, kind, record_id)


def beneath(store: Store) -> Store:
    """The backend beneath the owners and the policy, for a run's writes to the records whose start was checked
    (its steps, its end, its events): checking them again would only read the same owner once more per write."""
    return store.inner if isinstance(store, OwnedStore) else store


def owned(store: Store, policy: AccessPolicy | None = None) -> Store:
    """``store`` with owners stamped and the policy (default: each caller acts on what it owns) enforced."""
    if isinstance(store, OwnedStore):
        return cast(Store, store)
    return cast(Store, OwnedStore(store, policy or AccessPolicy()))
