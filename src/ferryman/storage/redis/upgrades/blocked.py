"""Redis layout 3: what a shield blocked, stored raw by earlier versions, withheld in place.

The step of :mod:`.runner` that does for Redis what the SQL revision ``0009_blocked_text``
does: each turn's stored JSON goes through :func:`~.blocked_text.withhold`, and what it says
is written back, one turn per transaction: the turn's inputs and output, step bodies, history messages
(each keeps its id; a refusal joined after them draws a new one from ``seq``, as history
messages do), stream events (each keeps its number), and, for a blocked input, its response's
input items and their copies in the conversation. A turn already converted is left as it is,
so a replica that finishes a conversion another left midway changes nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.storage.blocked_text import StoredTurn, Withheld, candidate, withheld_item, withhold
from ferryman.storage.redis.store_keys import (
    RESPONSE,
    SEQ,
    STEP_BODIES,
    STEPS,
    TURN,
    TURN_EVENTS,
    Keys,
    event_member,
    message_row,
    stored_event,
)

MESSAGES = "messages"
ITEM_BODIES = "item_bodies"
"""Layout 3's hash of an owner's item bodies (layout 17 moved items into the kernel)."""
_SCAN_BATCH = 500


async def withhold_blocked_text(client: Redis, keys: Keys, lock: Lock, escaped: Callable[[str], str]) -> None:
    """Withhold the blocked text of every turn that has steps (``escaped``: a prefix as a ``SCAN MATCH`` literal)."""
    base = keys.base(STEP_BODIES)
    async for key in client.scan_iter(match=escaped(base) + "*", count=_SCAN_BATCH):
        await _withhold_turn(client, keys, cast(str, key)[len(base) :])
        await lock.reacquire()


async def _withhold_turn(client: Redis, keys: Keys, turn_id: str) -> None:
    step_bodies = cast(list[str], await client.hvals(keys.of(STEP_BODIES, turn_id)))
    if not any(candidate(body) for body in step_bodies):
        return  # most turns: no shield blocked anything in them
    async with client.pipeline(transaction=False) as pipe:
        pipe.hgetall(keys.of(TURN, turn_id))
        pipe.zrange(keys.of(STEPS, turn_id), 0, -1)
        pipe.hgetall(keys.of(STEP_BODIES, turn_id))
        pipe.lrange(keys.of(MESSAGES, turn_id), 0, -1)
        pipe.zrange(keys.of(TURN_EVENTS, turn_id), 0, -1, withscores=True)
        turn, step_ids, bodies, messages, events = await pipe.execute()
    if "inputs" not in turn:
        return  # a turn deleted meanwhile, its steps left behind
    steps = [(step_id, bodies[step_id]) for step_id in step_ids if step_id in bodies]
    rows = [message_row(entry) for entry in messages]
    stored = [(stored_event(member), member, score) for member, score in events]
    change = withhold(
        StoredTurn(
            inputs=turn["inputs"],
            output=turn.get("output"),
            status=turn.get("status", ""),
            steps=[body for _, body in steps],
            messages=[body for _, body in rows],
            events=[event.data for event, _, _ in stored],
        )
    )
    await _write(client, keys, turn_id, turn, change, steps, rows, stored)


async def _write(
    client: Redis,
    keys: Keys,
    turn_id: str,
    turn: dict[str, str],
    change: Withheld,
    steps: list[tuple[str, str]],
    rows: list[tuple[int, str]],
    events: list[tuple[Any, str, float]],
) -> None:
    items = await _withheld_items(client, keys, turn.get("response_id")) if change.input_blocked else {}
    appended = []
    for body in change.appended:
        appended.append(f"{await client.incr(keys.global_(SEQ))} {body}")
    async with client.pipeline(transaction=True) as pipe:
        if change.inputs is not None:
            pipe.hset(keys.of(TURN, turn_id), "inputs", change.inputs)
        if change.output is not None:
            pipe.hset(keys.of(TURN, turn_id), "output", change.output)
        for index, body in change.steps.items():
            pipe.hset(keys.of(STEP_BODIES, turn_id), steps[index][0], body)
        for index, body in change.messages.items():
            pipe.lset(keys.of(MESSAGES, turn_id), index, f"{rows[index][0]} {body}")
        if appended:
            pipe.rpush(keys.of(MESSAGES, turn_id), *appended)
        for index, data in change.events.items():
            event, member, score = events[index]
            pipe.zrem(keys.of(TURN_EVENTS, turn_id), member)
            pipe.zadd(keys.of(TURN_EVENTS, turn_id), {event_member(event.seq, data): score})
        for owner, bodies in items.items():
            for item_id, body in bodies.items():
                pipe.hset(keys.of(ITEM_BODIES, owner), item_id, body)
        await pipe.execute()


async def _withheld_items(client: Redis, keys: Keys, response_id: str | None) -> dict[str, dict[str, str]]:
    """The withheld input items of a blocked turn's response, and of its conversation's copies, by owner."""
    if not response_id:
        return {}
    found = cast(dict[str, str], await client.hgetall(keys.of(ITEM_BODIES, response_id)))
    withheld = {item_id: withheld_item(body) for item_id, body in found.items()}
    owners = {response_id: withheld}
    conversation_id = cast(str | None, await client.hget(keys.of(RESPONSE, response_id), "conversation_id"))
    if conversation_id and withheld:
        ids = list(withheld)
        present = await client.hmget(keys.of(ITEM_BODIES, conversation_id), ids)
        owners[conversation_id] = {i: withheld[i] for i, body in zip(ids, present, strict=True) if body is not None}
    return {owner: bodies for owner, bodies in owners.items() if bodies}
