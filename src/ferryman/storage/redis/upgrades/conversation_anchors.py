"""Redis layout 19: conversations' anchors go; a conversation is its kernel record alone.

Layout 18 kept, beside each conversation's kernel record, an anchor hash (``conversation:<id>``, its session's
id) that the responses' scripts checked, and each session's set of its conversations (``session_convs:<session
id>``). The scripts check the kernel's record now, so both go. Deleting keys again deletes nothing: a conversion
that died midway, run again, finishes.
"""

from __future__ import annotations

from collections.abc import Callable

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.storage.redis.record_moves import delete_scanned
from ferryman.storage.redis.store_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_ANCHORS = ("conversation", "session_convs")


async def drop_conversation_anchors(client: Redis, keys: Keys, lock: Lock, escaped: Callable[[str], str]) -> None:
    """Delete every conversation's anchor hash and every session's set of its conversations.

    Args:
        client: The deployment's client.
        keys: Its keys.
        lock: The upgrade's lock, renewed as batches go.
        escaped: A prefix as a literal in a ``SCAN MATCH`` pattern.
    """
    for kind in _ANCHORS:
        await delete_scanned(client, lock, escaped(keys.base(kind)) + "*")
