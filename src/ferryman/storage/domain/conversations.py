"""Conversations as records of the kernel, with their items under them (the responses made in them are not here).

A conversation is a root record of kind ``conversation``, its body the
:class:`~ferryman.storage.base.ConversationRecord`'s fields, created at its
``created_at``; its owner rides in the record's own write, so a caller's page of
conversations is filtered in the query. Its items are records under it
(:mod:`.items`), and its deletion deletes them. The record is all there is of
it: a response's start in it holds the record (SQL: its row, ``FOR KEY SHARE``;
Redis: a check in the start's script), so a conversation deleted meanwhile
takes no response.
"""

from __future__ import annotations

from collections.abc import Sequence

from ferryman.api.responses import Item
from ferryman.errors import NotFoundError
from ferryman.storage.base import ConversationRecord
from ferryman.storage.domain.items import item_puts
from ferryman.storage.domain.kinds import CONVERSATION, SESSION
from ferryman.storage.domain.records import FieldsCodec, HasKernel, Records
from ferryman.storage.kernel import ops
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.protocol import Kernel


def conversations(kernel: Kernel) -> Records[ConversationRecord]:
    """Conversations, by id, in creation order."""
    codec = FieldsCodec(ConversationRecord)
    return Records(kernel, CONVERSATION, codec, lambda conv: conv.conversation_id, lambda conv: conv.created_at)


def conversation_writes(
    kernel: Kernel, record: ConversationRecord, items: Sequence[Item], owner: Owner | None, *, opens_session: bool
) -> list[ops.Op]:
    """The kernel batch of a new conversation: its session's check (unless the same write opens it), its record
    with its owner, its first items.

    Raises:
        InvalidRequestError: an item has no id, or an id repeats.
    """
    check = [] if opens_session else [ops.Check(SESSION, record.session_id)]
    return [*check, conversations(kernel).put(record, owner=owner), *item_puts(record.conversation_id, items)]


class ConversationDeletes:
    """A conversation's delete over a store's kernel (a base of each backend's store)."""

    async def delete_conversation(self: HasKernel, conversation_id: str) -> None:
        """Delete a conversation's record and its items; responses made in it stay.

        Raises:
            NotFoundError: there is no such conversation.
        """
        if not await conversations(self.kernel).delete(conversation_id):
            raise NotFoundError(f"conversation '{conversation_id}' not found")
