"""Forks of conversations: a new conversation whose items are another's up to an item, shared, not copied.

A fork is a new, empty conversation (with a session of its own for its
responses' turns), owned by its caller, and a lineage
(:mod:`ferryman.storage.domain.forks`) naming the conversation it shares with and
the last item it shares. The shared items keep their ids; the fork's item
listing, its items and what a response in it reads follow the lineage
(:mod:`.fork_reads`), through a fork of a fork too. The lineage is written
first, then the session, then the conversation (in writes of their own); a
lineage whose conversation is missing is a fork being made for
:data:`.FORKING_SECONDS`, then ignored and deleted when found. Forking while the
conversation is deleted or changed is settled as for sessions (``forks.py``): the
change marks it first and one of the two sees the other.

Items change where turns do not: a fork that deletes an item it shares hides it
from itself (its lineage lists it), leaving the original's; its own forks that
share that item first get a holder of the fork as it was (as below), so the
hide changes that fork alone. Deleting an item
that forks share, or a conversation that forks share, first copies its own items
those forks share into a holder (items of no conversation, under
``forkhist_...``, keeping their ids, with the original's own lineage), and the
forks share the holder instead (copy-on-delete). A holder is deleted once no
fork shares it, or, if the change failed or died before any fork came to share
it, by that change or the next (its mark names the holder).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

from ferryman.api.responses import Conversation, Item
from ferryman.auth.filters import owner_of
from ferryman.auth.principal import acting_as, current_principal
from ferryman.errors import ConflictError, NotFoundError
from ferryman.ids import new_hex, new_id, utcnow
from ferryman.storage.base import ConversationRecord, SessionRecord, Store
from ferryman.storage.domain.forks import Lineage
from ferryman.storage.domain.kinds import CONVERSATION

from .checked_records import CheckedRecords
from .fork_reads import ForkReads
from .forks import FORKING_SECONDS, forget_lineage
from .idempotency import Claim, answered, forget_stored, settlement, stored_record
from .record_guard import RecordGuard

HELD_ITEMS = "forkhist_"
"""The prefix of the holders of deleted items that forks share."""


def conversation_of(record: ConversationRecord) -> Conversation:
    """A conversation as the API shows it."""
    return Conversation(id=record.conversation_id, created_at=record.created_at, metadata=record.metadata)


class ConversationForks:
    """Forks conversations, and keeps what forks share when their original changes.

    Each call but :meth:`create` and :meth:`fork` follows the service's check of the caller on the
    conversation, so items are read and written unchecked.

    Args:
        store: The storage backend.
        records: The conversations' records, read through the access policy.
        reads: Reads through the forks' lineages.
        guard: The access step on the sessions conversations' responses run in, and their owners.
    """

    def __init__(
        self, store: Store, records: CheckedRecords[ConversationRecord], reads: ForkReads, guard: RecordGuard
    ) -> None:
        self._store = store
        self._guard = guard
        self._records = records
        self._reads = reads
        self._lineages = reads.lineages

    async def create(self, record: ConversationRecord, items: list[Item], key: Claim | None = None) -> None:
        """Store a new conversation with its first items as the caller's, in one write: its session, its record
        with the caller as owner, and ``key`` (its request's idempotency key, answered with the conversation).

        Raises:
            ForbiddenError: the policy does not let the caller create it.
            IdempotencyKeyHeldError: an earlier call with the key holds it (nothing is stored).
        """
        who = current_principal.get()
        self._records.access.check(who, "create", CONVERSATION, record.conversation_id)
        session = ("session", record.session_id)  # its responses run in it, owned like the conversation
        owner = self._guard.creating(who, session)
        opened = SessionRecord(record.session_id, None, "conversation", utcnow())
        settle = settlement(key, answered(conversation_of(record)))
        await self._store.create_conversation(record, items, owner, settle, session=opened)
        stored_record(key)
        self._guard.created(who, session)
        self._records.access.record(who, "create", CONVERSATION, record.conversation_id)

    async def fork(
        self, conversation_id: str, item_id: str, metadata: dict[str, str] | None, key: Claim | None = None
    ) -> ConversationRecord:
        """A new conversation sharing the conversation's items up to and including ``item_id``, with ``key`` (its
        request's idempotency key, claimed by the write that stores it; forgotten first should the fork be
        undone).

        Raises:
            IdempotencyKeyHeldError: an earlier call with the key holds it (the fork is undone).
            NotFoundError: the conversation, or the item in it, does not exist (or the caller may not read it).
        """
        source = await self._records.get(current_principal.get(), conversation_id)
        if item_id not in {item.id for item in await self._reads.items(conversation_id)}:
            raise NotFoundError(f"item '{item_id}' not found in conversation '{conversation_id}'")
        record = ConversationRecord(
            conversation_id=new_conversation_id(),
            session_id=new_id(),
            metadata=dict(source.metadata if metadata is None else metadata),
            created_at=int(time.time()),
        )
        lineage = Lineage(id=record.conversation_id, of="conversation", source=conversation_id, through=item_id)
        await self._lineages.create(lineage, owner_of(current_principal.get()))
        try:
            if await self._lineages.marked(conversation_id):
                raise ConflictError(f"conversation '{conversation_id}' is being changed; fork it again")
            await self.create(record, [], key)
            await self._still_shared(record.conversation_id, conversation_id)
        except BaseException:
            await forget_stored(self._store, key)  # first: a repeat must not be told of a fork undone
            with acting_as(None):
                with contextlib.suppress(NotFoundError):
                    await self._store.delete_conversation(record.conversation_id)
                await self._lineages.delete(record.conversation_id)
            raise
        return record

    async def _still_shared(self, fork_id: str, source_id: str) -> None:
        """After a fork was written: its lineage is still there, and its source too unless a change of the
        source saw the lineage and gave the fork a holder (as :meth:`.SessionForks._still_shared`)."""
        with acting_as(None):
            lineage = await self._lineages.find(fork_id)
            if lineage is None:
                raise ConflictError(f"conversation '{source_id}' was deleted while it was forked")
            if lineage.source == source_id and await self._records.records.find(source_id) is None:
                raise NotFoundError(f"conversation '{source_id}' not found")

    async def delete_item(self, conversation_id: str, item_id: str) -> None:
        """Delete one item: an own one (first kept for the forks that share it), or hide a shared one (first
        kept as it was for this conversation's forks that share it).

        The caller's updating the conversation was checked first (``ConversationService.delete_item``).

        Raises:
            NotFoundError: the conversation has no such item.
            ConflictError: the conversation is being deleted or changed.
        """
        try:
            await self._store.get_item(conversation_id, item_id)
        except NotFoundError:
            if item_id not in {item.id for item in await self._reads.inherited_items(conversation_id)}:
                raise
            async with self.detached(conversation_id, item_id, own=False):
                with acting_as(None):
                    await self._lineages.change(conversation_id, lambda kept: _hiding(kept, item_id))
            return
        async with self.detached(conversation_id, item_id):
            await self._store.delete_item(conversation_id, item_id)

    @contextlib.asynccontextmanager
    async def detached(self, conversation_id: str, item_id: str | None = None, own: bool = True
                       ) -> AsyncIterator[None]:  # fmt: skip
        """Around the delete of the conversation (``item_id`` None) or of one of its items (``own`` False: its
        hide of a shared one): mark it, give what forks share of the part going to a holder, let the change
        run, lift the mark (as :meth:`.SessionForks.detached`).

        Raises:
            ConflictError: another such change of the conversation is under way.
        """
        await self._drop_unused(await self._lineages.mark(conversation_id))
        try:
            await self._detach(conversation_id, item_id, own)
            yield
        finally:
            await self._drop_unused(await self._lineages.unmark(conversation_id))

    async def _drop_unused(self, holder: str) -> None:
        """Delete a holder a change began and no fork came to share (the change failed or died first)."""
        if not holder or await self._lineages.of_source(holder):
            return
        await self._lineages.delete(holder)  # its items with it: they are records under it

    async def _detach(self, conversation_id: str, item_id: str | None, own_item: bool) -> None:
        with acting_as(None):
            own = await self._store.all_items(conversation_id)
            ids = [item.id for item in own]
            seen = ids if own_item else [item.id for item in await self._reads.items(conversation_id)]
            if item_id is not None and item_id not in seen:  # gone meanwhile: its delete or hide moved the forks
                return
            start = 0 if item_id is None else seen.index(item_id)

            def shares(fork: Lineage) -> bool:  # the part going: what an item's delete or hide moves is at or after it
                return item_id is None or (fork.through in seen and seen.index(fork.through) >= start)

            forks = [f for f in await self._lineages.of_source(conversation_id) if shares(f) and await self._exists(f)]
            if forks:
                await self._give(conversation_id, own, forks)

    async def _give(self, conversation_id: str, own: list[Item], forks: list[Lineage]) -> None:
        """Have these forks share a holder of what they share of the conversation as it is now, in its place."""
        ids = [item.id for item in own]
        lineage = await self._lineages.find(conversation_id)
        reach = max((ids.index(f.through) for f in forks if f.through in ids), default=-1)
        if reach < 0:  # they share only what it shares in turn: from its source, directly
            if lineage is not None:
                for fork in forks:
                    await self._lineages.change(fork.id, lambda kept: _moved(kept, lineage))
            return
        holder = f"{HELD_ITEMS}{new_hex()}"
        await self._lineages.note(conversation_id, holder)
        above = lineage or Lineage(id=holder, of="conversation", source="", through="")
        await self._lineages.create(above.model_copy(update={"id": holder}), None)
        await self._store.add_items(holder, own[: reach + 1])
        for fork in forks:
            await self._lineages.change(fork.id, lambda kept: _held_by(kept, holder))

    async def _exists(self, lineage: Lineage) -> bool:
        """Whether a lineage's conversation (or holder) exists; one whose conversation was never written is
        deleted."""
        if lineage.id.startswith(HELD_ITEMS) or time.time() - lineage.created_at < FORKING_SECONDS:
            return True
        if await self._records.records.find(lineage.id) is None:
            await self._lineages.delete(lineage.id)
            return False
        return True

    async def forget(self, conversation_id: str) -> None:
        """After a conversation was deleted: delete its lineage, and the holder it shared if no fork shares it."""
        await forget_lineage(self._reads, conversation_id, _items_go_with_their_holder)


async def _items_go_with_their_holder(holder: str) -> None:
    """Nothing to delete before a holder's lineage: its items are records under it, deleted with it."""


def _hiding(lineage: Lineage, item_id: str) -> Lineage:
    return lineage.model_copy(update={"hidden": [*lineage.hidden, item_id]})


def _moved(fork: Lineage, source: Lineage) -> Lineage:
    """A fork sharing only what ``source``'s conversation shares in turn, sharing it from there directly."""
    hidden = [*source.hidden, *(item for item in fork.hidden if item not in source.hidden)]
    return fork.model_copy(update={"source": source.source, "hidden": hidden, "held": source.held})


def _held_by(fork: Lineage, holder: str) -> Lineage:
    """A fork sharing a holder in place of its deleted source (the same items, under the same ids)."""
    return fork.model_copy(update={"source": holder, "held": True})


def new_conversation_id() -> str:
    """A new conversation's id."""
    return new_id("conv")
