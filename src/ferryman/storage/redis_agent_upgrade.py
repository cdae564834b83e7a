"""Redis layout 7: agents become records of the storage kernel (their sessions stay where they are).

Layout 6 kept each agent in a hash (``agent:<id>``: its config's JSON, its creation time as ISO text and its
number), the ids in the ``agents`` sorted set by that number (the creation order), and their owners in the
``owners:agent`` hash. Each agent is written through the kernel itself (so its layout is the kernel's), in
the old order, created at its own creation time, its body the wire ``Agent`` as this version writes it,
with its owner; then its hash goes. The index and the owners go once every agent is a record.

Every write is an upsert, which keeps an existing record's number, time and owner, and an agent whose hash is
gone was converted already: a conversion that died midway, run again, writes the rest after them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from .domain.kinds import AGENT, SCHEMA
from .kernel.model import Owner
from .kernel.ops import Put
from .redis.kernel import RedisKernel
from .redis_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_AGENTS = "agents"
_AGENT = "agent"
_OWNERS = "owners"
_FIELDS = ("config", "created_at")
_BATCH = 100


async def move_agents(client: Redis, keys: Keys, lock: Lock) -> None:
    """Write every agent of layout 6 as a kernel record with its owner, then delete the old keys."""
    kernel = RedisKernel(client, SCHEMA, prefix=f"{keys.prefix}k:")  # where a store's kernel keeps its keys
    await kernel.open()
    try:
        index, owners = keys.global_(_AGENTS), keys.of(_OWNERS, _AGENT)
        start = 0
        while ids := cast(list[str], await client.zrange(index, start, start + _BATCH - 1)):
            await _move(client, kernel, keys, ids, owners)
            await lock.reacquire()  # many agents must not outlast the lock
            start += len(ids)
        await client.delete(index, owners)  # one command: both or neither
    finally:
        await kernel.close()


async def _move(client: Redis, kernel: RedisKernel, keys: Keys, ids: list[str], owners: str) -> None:
    """Write one batch of agents (those whose hash is still there) as records, then delete their hashes."""
    async with client.pipeline(transaction=False) as pipe:
        for agent_id in ids:
            pipe.hmget(keys.of(_AGENT, agent_id), list(_FIELDS))
        pipe.hmget(owners, ids)
        *found, stored_owners = cast(list[list[str | None]], await pipe.execute())
    puts: list[Put] = []
    for agent_id, (config, created_at), owner in zip(ids, found, stored_owners, strict=True):
        if config is None or created_at is None:
            continue  # converted by an earlier run (its hash deleted), or never whole
        moment = _moment(created_at)
        body = {"agent_id": agent_id, "agent_config": json.loads(config), "created_at": _wire_time(moment)}
        puts.append(Put(AGENT, agent_id, body, owner=_owner(owner), mode="upsert", at=moment.timestamp()))
    if puts:
        await kernel.write(puts)
        await client.delete(*(keys.of(_AGENT, put.id) for put in puts))


def _moment(iso: str) -> datetime:
    moment = datetime.fromisoformat(iso)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def _wire_time(moment: datetime) -> str:
    """A time as the wire model's JSON dump writes it (pydantic: ISO 8601, UTC as ``Z``)."""
    return moment.isoformat().replace("+00:00", "Z")


def _owner(stored: str | None) -> Owner | None:
    """An owner of layout 6 (typed: ``{"kind", "id", "attributes"}``) as the kernel stores it."""
    found: Any = None if stored is None else json.loads(stored)
    return None if found is None else Owner.from_json(found)
