"""Redis layout 13: conversations become records of the storage kernel.

Layout 12 kept each conversation in a hash (``conversation:<id>``: ``session_id``, ``metadata`` as JSON text,
``created_at``), the ids in the ``conversations`` sorted set by number (the creation order, since layout 6), and
their owners in the ``owners:conversation`` hash. Each conversation is written through the kernel itself (so its
layout is the kernel's), in the old order, created at its own creation time, its body the
``ConversationRecord``'s fields, with its owner; then its hash loses ``metadata`` and ``created_at`` and keeps
``session_id``: the responses' scripts find a conversation, and its session, by that hash. Its items, its
responses' index and its session's set of conversations stay. The index and the owners go once every
conversation is a record.

Every write is an upsert, which keeps an existing record's number, time and owner, and a conversation whose hash
has no metadata was converted already: a conversion that died midway, run again, writes the rest after them.
"""

from __future__ import annotations

import json

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.storage.domain.kinds import CONVERSATION
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.ops import Put
from ferryman.storage.redis.record_moves import move_hashes
from ferryman.storage.redis.store_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_CONVERSATIONS = "conversations"
_CONVERSATION = "conversation"
_OWNERS = "owners"
_FIELDS = ("session_id", "metadata", "created_at")
_MOVED = ("metadata", "created_at")
"""The fields that go from a conversation's hash; ``session_id`` stays."""


async def move_conversations(client: Redis, keys: Keys, lock: Lock) -> None:
    """Write every conversation of layout 12 as a kernel record with its owner, then delete the old keys.

    Args:
        client: The deployment's client.
        keys: Its keys.
        lock: The upgrade's lock, renewed as batches go.
    """
    index = keys.global_(_CONVERSATIONS)
    await move_hashes(
        client, keys, lock, kind=_CONVERSATION, index=index, fields=_FIELDS, to_put=_conversation, drop=_MOVED
    )
    await client.delete(index, keys.of(_OWNERS, _CONVERSATION))  # one command: all or none


def _conversation(conversation_id: str, values: list[str | None], owner: Owner | None) -> Put | None:
    """A conversation's record, created at its own creation time, as a conversation's creation writes it."""
    session_id, metadata, created_at = values
    if metadata is None or created_at is None:
        return None  # converted by an earlier run (its fields deleted)
    body = {
        "conversation_id": conversation_id,
        "session_id": session_id,
        "metadata": json.loads(metadata),
        "created_at": int(created_at),
    }
    return Put(CONVERSATION, conversation_id, body, owner=owner, mode="upsert", at=float(body["created_at"]))
