"""Conversations as records of the kernel (their items and the responses made in them are not here).

A conversation is a root record of kind ``conversation``, its body the
:class:`~ferryman.storage.base.ConversationRecord`'s fields, created at its
``created_at``; its owner rides in the record's own write, so a caller's page of
conversations is filtered in the query. What the responses store keeps of it
(its items, the anchor a response's start holds) is kept under the same id and
written with the record (see :meth:`~ferryman.storage.base.ResponseStore.create_conversation`).
"""

from __future__ import annotations

from ferryman.storage.base import ConversationRecord
from ferryman.storage.domain.kinds import CONVERSATION
from ferryman.storage.domain.records import FieldsCodec, Records
from ferryman.storage.kernel.protocol import Kernel


def conversations(kernel: Kernel) -> Records[ConversationRecord]:
    """Conversations, by id, in creation order."""
    codec = FieldsCodec(ConversationRecord)
    return Records(kernel, CONVERSATION, codec, lambda conv: conv.conversation_id, lambda conv: conv.created_at)
