"""Reading a fork: the history it shares with its source, through its lineage, then its own.

A fork's lineage (:mod:`ferryman.storage.domain.forks`) names its source and the
last turn or item of the source's history it shares; the source may be a fork in
turn, so reads follow the chain up. What is shared is read as the server: the
caller was checked on the fork itself, which it owns, and reading it never needs
access to its original.

A session, conversation or holder that has no lineage never gets one (a fork's
is written before the fork), so this replica remembers those it found without one.

What a fork shares changes only when a lineage of its chain does (copy-on-delete
repoints it, a hide lists an item), and every change of a lineage raises its
version; so this replica keeps each fork's shared history (and the messages a
turn reads of it) with the versions of its chain, and uses it again after one
read of those versions shows none changed. Shared turns and items never change
in place (only ended turns are shared).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from cachetools import LRUCache

from ferryman.api.agents import Turn
from ferryman.api.content import Message
from ferryman.api.responses import Item
from ferryman.errors import NotFoundError
from ferryman.storage.base import Page, Store
from ferryman.storage.domain.forks import Lineage, Lineages

log = logging.getLogger(__name__)

_T = TypeVar("_T")

_PLAIN_CACHE_SIZE = 65536
"""How many ids known to share nothing this replica keeps."""

_SHARED_CACHE_SIZE = 1024
"""How many forks' shared histories this replica keeps."""

_MAX_DEPTH = 1000
"""The longest chain of forks read (a guard: a chain never loops)."""


@dataclass(frozen=True)
class _Cached:
    """A fork's shared history, as read when its chain's lineages had these versions."""

    versions: dict[str, str]
    value: list[Any]


class ForkReads:
    """Sessions' turns and conversations' items, with what each shares through its lineage.

    Args:
        store: The storage backend (callers check the fork itself; what it shares is read unchecked).
        lineages: The forks' lineages.
    """

    def __init__(self, store: Store, lineages: Lineages) -> None:
        self._store = store
        self.lineages = lineages
        self._plain: LRUCache[str, bool] = LRUCache(maxsize=_PLAIN_CACHE_SIZE)
        self._cache: LRUCache[str, _Cached] = LRUCache(maxsize=_SHARED_CACHE_SIZE)
        self._history: LRUCache[str, tuple[_Cached, list[Message]]] = LRUCache(maxsize=_SHARED_CACHE_SIZE)

    def plain(self, session_id: str) -> None:
        """Note a session this replica just opened as a plain one: it shares nothing, and never will (a lineage
        is made only with the session it is of), so its first turn does not look for one."""
        self._plain[session_id] = True

    async def lineage(self, fork_id: str) -> Lineage | None:
        """The lineage of ``fork_id``, or None when it shares nothing."""
        if fork_id in self._plain:
            return None
        found = await self.lineages.find(fork_id)
        if found is None:
            self._plain[fork_id] = True
        return found

    # ---- the chain of lineages, cached --------------------------------------

    async def _chain(self, fork_id: str) -> list[Lineage]:
        """The lineages from ``fork_id``'s up to the first source that shares nothing (one read per level)."""
        chain: list[Lineage] = []
        lineage = await self.lineage(fork_id)
        while lineage is not None and len(chain) < _MAX_DEPTH:
            chain.append(lineage)
            lineage = await self.lineage(lineage.source) if lineage.source else None
        return chain

    async def _shared(self, fork_id: str, own: Callable[[str], Awaitable[list[_T]]], key: Callable[[_T], str]
                      ) -> list[_T]:  # fmt: skip
        """What ``fork_id`` shares through its chain, from this replica's cache when no lineage of the chain
        changed since it was read (one read of their versions), else read again: each source's own part cut at
        the ``through`` of the lineage below, less what that lineage hides."""
        cached = self._cache.get(fork_id)
        if cached is not None and await self.lineages.versions(list(cached.versions)) == cached.versions:
            return cast("list[_T]", cached.value)
        chain = await self._chain(fork_id)
        if not chain:
            return []
        versions = await self.lineages.versions([lineage.id for lineage in chain])
        renamed = {old: new for lineage in chain for old, new in lineage.renamed.items()}
        shared: list[_T] = []
        for level in reversed(chain):  # a holder of a source that shared nothing names no source
            shared = _cut([*shared, *await own(level.source)], level, renamed, key) if level.source else []
        if len(versions) == len(chain):  # else one went while it was read: no caching what may be gone
            self._cache[fork_id] = _Cached(versions, shared)
        return shared

    # ---- sessions ----------------------------------------------------------

    async def inherited_turns(self, session_id: str) -> list[Turn]:
        """The turns the session shares with its source (each as its source holds it), in order."""
        return await self._shared(session_id, self._own_turns, _turn_id)

    async def _own_turns(self, session_id: str) -> list[Turn]:
        return await self._store.list_turns([session_id])

    async def inherited_of(self, session_ids: list[str]) -> dict[str, list[Turn]]:
        """The shared turns of each of these sessions that shares any (one read for the lineages)."""
        unknown = [session_id for session_id in session_ids if session_id not in self._plain]
        found = await self.lineages.many(unknown)
        for session_id in unknown:
            if session_id not in found:
                self._plain[session_id] = True
        return {session_id: await self.inherited_turns(session_id) for session_id in found}

    async def listing(self, session_id: str) -> list[Turn]:
        """The session's whole history: the turns it shares, then its own (read as the server)."""
        return [*await self.inherited_turns(session_id), *await self._store.list_turns([session_id])]

    async def inherited_turn(self, session_id: str, turn_id: str) -> Turn:
        """One turn the session shares.

        Raises:
            NotFoundError: it shares no such turn.
        """
        found = next((turn for turn in await self.inherited_turns(session_id) if turn.turn_id == turn_id), None)
        if found is None:
            raise NotFoundError(f"turn '{turn_id}' of session '{session_id}' not found")
        return found

    async def inherited_history(self, session_id: str) -> list[Message]:
        """The messages of the completed turns the session shares, each turn's kept together, in order: what
        its own history continues."""
        shared = await self.inherited_turns(session_id)
        entry, kept = self._cache.get(session_id), self._history.get(session_id)
        if entry is not None and kept is not None and kept[0] is entry:
            return kept[1]
        turns = [turn for turn in shared if turn.status == "completed"]
        by_session: dict[str, list[str]] = {}
        for turn in turns:
            by_session.setdefault(turn.session_id, []).append(turn.turn_id)
        messages: dict[str, list[Message]] = {}
        for source, turn_ids in by_session.items():
            messages.update(await self._store.turn_messages(source, turn_ids))
        history = [message for turn in turns for message in messages.get(turn.turn_id, [])]
        if entry is not None:
            self._history[session_id] = (entry, history)
        return history

    # ---- conversations -----------------------------------------------------

    async def inherited_items(self, owner: str) -> list[Item]:
        """The items a conversation (or a holder) shares with its source, less those it deleted, in order."""
        return await self._shared(owner, self._store.all_items, _item_id)

    async def items(self, owner: str) -> list[Item]:
        """Every item of a conversation: those it shares, then its own."""
        return [*await self.inherited_items(owner), *await self._store.all_items(owner)]

    async def item(self, conversation_id: str, item_id: str) -> Item:
        """One item of a conversation, its own or shared.

        Raises:
            NotFoundError: it has no such item.
        """
        try:
            return await self._store.get_item(conversation_id, item_id)
        except NotFoundError:
            found = next((i for i in await self.inherited_items(conversation_id) if i.id == item_id), None)
            if found is None:
                raise
            return found

    async def page_items(self, conversation_id: str, after: str | None, limit: int, order: str) -> Page[Item]:
        """A page of a conversation's items (``asc``: the shared ones first), after the item ``after``."""
        shared = await self.inherited_items(conversation_id)
        ids = [item.id for item in shared]
        if not shared or (after is not None and after not in ids and order == "asc"):
            return await self._store.list_items(conversation_id, after, limit, order)
        if order == "asc":
            head = shared[0 if after is None else ids.index(after) + 1 :]
            if len(head) > limit:
                return Page(head[:limit], True)
            room = limit - len(head)
            own = await self._store.list_items(conversation_id, None, max(room, 1), "asc")  # 1: are there any?
            return Page([*head, *own.items[:room]], own.has_more or len(own.items) > room)
        if after is not None and after in ids:
            earlier = shared[: ids.index(after)][::-1]
            return Page(earlier[:limit], len(earlier) > limit)
        own = await self._store.list_items(conversation_id, after, limit, "desc")
        if own.has_more:
            return own
        room = limit - len(own.items)
        return Page([*own.items, *shared[::-1][:room]], len(shared) > room)


def _turn_id(turn: Turn) -> str:
    return turn.turn_id


def _item_id(item: Item) -> str:
    return item.id or ""


def _cut(history: list[_T], lineage: Lineage, renamed: dict[str, str], key: Callable[[_T], str]) -> list[_T]:
    """A source's history through the lineage's last shared turn or item (found under its copy's id if a
    holder renamed it), less what the lineage hides."""
    ids = [key(entry) for entry in history]
    through, hops = lineage.through, 0
    while through not in ids and through in renamed and hops < _MAX_DEPTH:
        through, hops = renamed[through], hops + 1
    if through not in ids:  # its source went while it was forked (the fork is undone): nothing is left to share
        log.warning("fork %s lost what it shared of %s", lineage.id, lineage.source)
        return []
    hidden = set(lineage.hidden)
    return [entry for entry in history[: ids.index(through) + 1] if key(entry) not in hidden]
