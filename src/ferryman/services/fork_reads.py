"""Reading a fork: the history it shares with its source, through its lineage, then its own.

A fork's lineage (:mod:`ferryman.storage.domain.forks`) names its source and the
last turn or item of the source's history it shares; the source may be a fork in
turn, so reads follow the chain up. What is shared is read as the server: the
caller was checked on the fork itself, which it owns, and reading it never needs
access to its original. Only a history's own part is read through the caller's
store.

A session, conversation or holder that has no lineage never gets one (a fork's
is written before the fork), so this replica remembers those it found without one.
"""

from __future__ import annotations

import logging

from cachetools import LRUCache

from ferryman.api.agents import Turn
from ferryman.api.content import Message
from ferryman.api.responses import Item
from ferryman.auth.principal import acting_as
from ferryman.errors import NotFoundError
from ferryman.storage.base import Page, Store
from ferryman.storage.domain.forks import Lineage, Lineages

log = logging.getLogger(__name__)

_PLAIN_CACHE_SIZE = 65536
"""How many ids known to share nothing this replica keeps."""


class ForkReads:
    """Sessions' turns and conversations' items, with what each shares through its lineage.

    Args:
        store: The storage backend (the owner-checking one).
        lineages: The forks' lineages.
    """

    def __init__(self, store: Store, lineages: Lineages) -> None:
        self._store = store
        self.lineages = lineages
        self._plain: LRUCache[str, bool] = LRUCache(maxsize=_PLAIN_CACHE_SIZE)

    async def lineage(self, fork_id: str) -> Lineage | None:
        """The lineage of ``fork_id``, or None when it shares nothing."""
        if fork_id in self._plain:
            return None
        found = await self.lineages.find(fork_id)
        if found is None:
            self._plain[fork_id] = True
        return found

    # ---- sessions ----------------------------------------------------------

    async def inherited_turns(self, session_id: str) -> list[Turn]:
        """The turns the session shares with its source (each as its source holds it), in order."""
        lineage = await self.lineage(session_id)
        return [] if lineage is None else await self._turns_through(lineage)

    async def inherited_of(self, session_ids: list[str]) -> dict[str, list[Turn]]:
        """The shared turns of each of these sessions that shares any (one read for the lineages)."""
        unknown = [session_id for session_id in session_ids if session_id not in self._plain]
        found = await self.lineages.many(unknown)
        for session_id in unknown:
            if session_id not in found:
                self._plain[session_id] = True
        return {session_id: await self._turns_through(lineage) for session_id, lineage in found.items()}

    async def listing(self, session_id: str) -> list[Turn]:
        """The session's whole history: the turns it shares, then its own (read as the server)."""
        with acting_as(None):
            return [*await self.inherited_turns(session_id), *await self._store.list_turns([session_id])]

    async def _turns_through(self, lineage: Lineage) -> list[Turn]:
        turns = await self.listing(lineage.source)
        cut = next((i for i, turn in enumerate(turns) if turn.turn_id == lineage.through), None)
        if cut is None:  # its source was deleted while it was forked: nothing is left to share
            log.warning("fork %s lost what it shared of %s", lineage.id, lineage.source)
            return []
        return turns[: cut + 1]

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
        turns = [turn for turn in await self.inherited_turns(session_id) if turn.status == "completed"]
        by_session: dict[str, list[str]] = {}
        for turn in turns:
            by_session.setdefault(turn.session_id, []).append(turn.turn_id)
        messages: dict[str, list[Message]] = {}
        with acting_as(None):
            for source, turn_ids in by_session.items():
                messages.update(await self._store.turn_messages(source, turn_ids))
        return [message for turn in turns for message in messages.get(turn.turn_id, [])]

    # ---- conversations -----------------------------------------------------

    async def inherited_items(self, owner: str) -> list[Item]:
        """The items a conversation (or a holder) shares with its source, less those it deleted, in order."""
        lineage = await self.lineage(owner)
        if lineage is None:
            return []
        with acting_as(None):
            items = await self.items(lineage.source)
        cut = next((i for i, item in enumerate(items) if item.id == lineage.through), None)
        if cut is None:
            log.warning("fork %s lost what it shared of %s", lineage.id, lineage.source)
            return []
        hidden = set(lineage.hidden)
        return [item for item in items[: cut + 1] if item.id not in hidden]

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
