"""Redis layout 15: responses get their records in the storage kernel.

Layout 14 kept each response in a hash (``response:<id>``: ``turn_id``, ``session_id``, ``conversation_id``,
``''`` when none, ``previous_response_id``, ``background``, ``body``, the response's JSON with its
``created_at``, ``interrupted``, and ``seq``, the number it was created with), the ids in the ``responses``
sorted set by that number (their creation order), a conversation's in ``conv_responses:<conversation id>``,
scored likewise, and the owners in the ``owners:response`` hash. Each response gets its record through the
kernel itself (so its layout is the kernel's), in that order, dated by its creation, its body the
``ResponseHead``'s fields, with its owner; its hash loses ``seq`` and keeps the rest: it is the response, which
the record lists. The indexes and the owners go once every response has its record.

Every write is an upsert, which keeps an existing record's number, time and owner, and a response whose hash
has no number has its record already: a conversion that died midway, run again, writes the rest after them.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.storage.domain.kinds import RESPONSE
from ferryman.storage.domain.records import FieldsCodec
from ferryman.storage.domain.responses import ResponseHead
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.ops import Put
from ferryman.storage.redis.record_moves import delete_scanned, move_hashes
from ferryman.storage.redis.store_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_RESPONSE = "response"
_RESPONSES = "responses"
_CONV_RESPONSES = "conv_responses"
_OWNERS = "owners"
_FIELDS = ("conversation_id", "body", "seq")
_MOVED = ("seq",)
"""The field that goes from a response's hash (it ordered the indexes that go); the response stays."""
_HEAD = FieldsCodec(ResponseHead)


async def move_responses(client: Redis, keys: Keys, lock: Lock, escaped: Callable[[str], str]) -> None:
    """Write a kernel record, with its owner, for every response of layout 14, then delete the old keys.

    Args:
        client: The deployment's client.
        keys: Its keys.
        lock: The upgrade's lock, renewed as batches go.
        escaped: A prefix as a literal in a ``SCAN MATCH`` pattern.
    """
    index = keys.global_(_RESPONSES)
    await move_hashes(client, keys, lock, kind=_RESPONSE, index=index, fields=_FIELDS, to_put=_response, drop=_MOVED)
    await client.delete(index, keys.of(_OWNERS, _RESPONSE))  # one command: all or none
    await delete_scanned(client, lock, escaped(keys.base(_CONV_RESPONSES)) + "*")


def _response(response_id: str, values: list[str | None], owner: Owner | None) -> Put | None:
    """A response's record, dated by its creation, as a response's start writes it."""
    conversation_id, body, seq = values
    if body is None or seq is None:
        return None  # converted by an earlier run (its number deleted), or never whole
    created_at = int(json.loads(body)["created_at"])
    head = ResponseHead(response_id, conversation_id or None, created_at)
    return Put(RESPONSE, response_id, _HEAD.dump(head), owner=owner, mode="upsert", at=float(created_at))
