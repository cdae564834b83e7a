"""The Conversations API: a conversation is a session whose history is a list of items.

A conversation's record holds its owner (``storage.domain.conversations``). The access step is explicit: a
create stores the caller as owner in the record's own write; every other call checks the policy against the
stored owner first (a conversation the caller may not read looks missing), an update in the same write as its
check; and a page passes the caller's filter into the kernel's query.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from ferryman.api.responses import Conversation, CreateConversationRequest, Item, ItemList
from ferryman.auth.policy import Action
from ferryman.auth.principal import current_principal
from ferryman.ids import new_id
from ferryman.storage.base import ConversationRecord, Page, Store
from ferryman.storage.domain.forks import Lineages
from ferryman.storage.domain.kinds import CONVERSATION

from ..checked_records import CheckedRecords
from ..conversation_forks import ConversationForks, conversation_of, new_conversation_id
from ..fork_reads import ForkReads
from ..idempotency import Claim, answered, settlement, stored_record
from ..record_guard import RecordGuard
from .included import listed, shown_items
from .items import with_ids


class ConversationService:
    """Conversations and their items (a fork's: those it shares, then its own; see ``conversation_forks.py``)."""

    def __init__(self, store: Store, records: CheckedRecords[ConversationRecord], guard: RecordGuard) -> None:
        self._store = store
        self._records = records
        # Every read of items follows the check of the caller on their conversation (``_get``).
        self._reads = ForkReads(store, Lineages(store.kernel))
        self._forks = ConversationForks(store, records, self._reads, guard)
        self._session_deleted: list[Callable[[str], Awaitable[None]]] = []

    def on_session_deleted(self, callback: Callable[[str], Awaitable[None]]) -> None:
        """Have ``callback(session_id)`` run after a conversation is deleted (its code interpreter container)."""
        self._session_deleted.append(callback)

    async def create(self, request: CreateConversationRequest, key: Claim | None = None) -> Conversation:
        """A new conversation, optionally with first items, owned by the caller; ``key`` (its request's
        idempotency key) is claimed by the write that stores it, answered with it."""
        record = ConversationRecord(
            conversation_id=new_conversation_id(),
            session_id=new_id(),
            metadata=request.metadata or {},
            created_at=int(time.time()),
        )
        await self._forks.create(record, with_ids(list(request.items)), key)
        return conversation_of(record)

    async def fork(
        self, conversation_id: str, item_id: str, metadata: dict[str, str] | None, key: Claim | None = None
    ) -> Conversation:
        """A new conversation sharing the conversation's items up to and including ``item_id``; ``key`` (its
        request's idempotency key) is claimed by the write that stores it, answered with it."""
        return conversation_of(await self._forks.fork(conversation_id, item_id, metadata, key))

    async def get(self, conversation_id: str) -> Conversation:
        """One conversation."""
        return conversation_of(await self._get(conversation_id))

    async def _get(self, conversation_id: str, action: Action = "read") -> ConversationRecord:
        return await self._records.get(current_principal.get(), conversation_id, action)

    async def listing(self, after: str | None, limit: int, order: str) -> Page[Conversation]:
        """A page of the conversations the caller may read (filtered in the kernel's query), as ``get`` shows each.

        Raises:
            NotFoundError: the cursor names no conversation the caller may read.
        """
        page = await self._records.page(current_principal.get(), after, limit, order)
        return Page([conversation_of(record) for record in page.items], page.has_more)

    async def update(self, conversation_id: str, metadata: dict[str, str]) -> Conversation:
        """Replace a conversation's metadata."""
        record = await self._get(conversation_id, "update")
        await self._records.patch(current_principal.get(), conversation_id, {"metadata": metadata})
        return conversation_of(replace(record, metadata=metadata))

    async def delete(self, conversation_id: str) -> None:
        """Delete the conversation, its items and what is kept under its session; responses made in it remain.

        What its forks share of it is first given to a holder (``conversation_forks.py``).
        """
        record = await self._get(conversation_id, "delete")  # before its forks are moved
        async with self._forks.detached(conversation_id):
            await self._store.delete_conversation(conversation_id)
        self._records.access.record(current_principal.get(), "delete", CONVERSATION, conversation_id)
        await self._forks.forget(conversation_id)
        for callback in self._session_deleted:
            await callback(record.session_id)

    async def add_items(
        self,
        conversation_id: str,
        items: list[Item],
        include: frozenset[str] = frozenset(),
        key: Claim | None = None,
    ) -> ItemList:
        """Append items; return them with their ids, as a reader asking for ``include`` sees them. ``key`` (the
        request's idempotency key) is claimed by the write that stores them, answered with that list."""
        await self._get(conversation_id, "update")
        stored = with_ids(items)
        shown = shown_items(stored, include)
        answer = listed(ItemList, shown)
        await self._store.add_items(conversation_id, stored, settlement(key, answered(answer)))
        stored_record(key)
        return answer

    async def list_items(
        self, conversation_id: str, after: str | None, limit: int, order: str, include: frozenset[str] = frozenset()
    ) -> Page[Item]:
        """A page of items, as a reader asking for ``include`` sees them (``included.py``)."""
        await self._get(conversation_id)
        page = await self._reads.page_items(conversation_id, after, limit, order)
        return Page(shown_items(page.items, include), page.has_more)

    async def get_item(self, conversation_id: str, item_id: str, include: frozenset[str] = frozenset()) -> Item:
        """One item, as a reader asking for ``include`` sees it."""
        await self._get(conversation_id)
        (item,) = shown_items([await self._reads.item(conversation_id, item_id)], include)
        return item

    async def delete_item(self, conversation_id: str, item_id: str) -> Conversation:
        """Delete one item; return the conversation, as OpenAI does (a shared one is hidden from this
        conversation alone; one that forks share is kept for them: ``conversation_forks.py``)."""
        record = await self._get(conversation_id, "update")  # before forks are moved
        await self._forks.delete_item(conversation_id, item_id)
        return conversation_of(record)
