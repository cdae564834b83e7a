"""Redis layout 6: conversations get the indexes that list them, and the responses made in each.

Layout 5 kept a conversation as a hash alone, and a response's conversation as a field of the response's
hash: nothing listed either. This layout adds ``conversations`` (every conversation id, scored by a number
drawn at creation) and ``conv_responses:<conversation id>`` (its responses' ids, scored as in ``responses``).

The conversion adds every existing conversation to the index in the order of its creation time (then its id),
each with a number drawn now, so they come before any created after. Every addition leaves an entry already
there as it is, so a conversion that died midway, run again, keeps the order it had given and adds the rest.
"""

from __future__ import annotations

from typing import cast

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.storage.redis.store_keys import RESPONSE, SEQ, Keys

_BATCH = 500
# An upgrade keeps its own copy of the layout it converts: layout 13 deleted the first index, 15 the others.
CONVERSATIONS = "conversations"
RESPONSES = "responses"
CONV_RESPONSES = "conv_responses"
_CONVERSATION = "conversation"


async def index_conversations(client: Redis, keys: Keys, lock: Lock, escaped: str) -> None:
    """Index every conversation, and every response made in one, of layout 5.

    Args:
        client: The connection.
        keys: The deployment's keys.
        lock: The conversion lock, renewed between batches.
        escaped: ``keys.base("conversation")`` as a literal ``SCAN MATCH`` pattern.
    """
    found: list[tuple[int, str]] = []
    base = keys.base(_CONVERSATION)
    batch: list[str] = []
    async for key in client.scan_iter(match=escaped + "*", count=_BATCH):
        batch.append(key)
        if len(batch) == _BATCH:
            found.extend(await _created(client, base, batch))
            batch.clear()
            await lock.reacquire()
    found.extend(await _created(client, base, batch))
    found.sort()
    for start in range(0, len(found), _BATCH):
        ids = [conversation_id for _, conversation_id in found[start : start + _BATCH]]
        last = int(await client.incrby(keys.global_(SEQ), len(ids)))
        scores = {conversation_id: last - len(ids) + i + 1 for i, conversation_id in enumerate(ids)}
        await client.zadd(keys.global_(CONVERSATIONS), scores, nx=True)
        await lock.reacquire()
    await _index_responses(client, keys, lock)


async def _created(client: Redis, base: str, batch: list[str]) -> list[tuple[int, str]]:
    """``(created_at, id)`` of these conversation hashes (one deleted meanwhile is left out)."""
    if not batch:
        return []
    async with client.pipeline(transaction=False) as pipe:
        for key in batch:
            pipe.hget(key, "created_at")
        times = cast(list[str | None], await pipe.execute())
    return [(int(at), key.removeprefix(base)) for key, at in zip(batch, times, strict=True) if at is not None]


async def _index_responses(client: Redis, keys: Keys, lock: Lock) -> None:
    """Add each response made in a conversation to the conversation's index, with its own score."""
    scanned = 0
    async for response_id, score in client.zscan_iter(keys.global_(RESPONSES), count=_BATCH):
        conversation_id = cast(str | None, await client.hget(keys.of(RESPONSE, response_id), "conversation_id"))
        if conversation_id:
            await client.zadd(keys.of(CONV_RESPONSES, conversation_id), {response_id: score}, nx=True)
        scanned += 1
        if scanned % _BATCH == 0:  # many responses must not outlast the lock
            await lock.reacquire()
