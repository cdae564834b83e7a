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

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.storage.domain.kinds import AGENT
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.ops import Put
from ferryman.storage.redis.record_moves import move_hashes
from ferryman.storage.redis.store_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_AGENTS = "agents"
_AGENT = "agent"
_OWNERS = "owners"
_FIELDS = ("config", "created_at")


async def move_agents(client: Redis, keys: Keys, lock: Lock) -> None:
    """Write every agent of layout 6 as a kernel record with its owner, then delete the old keys."""
    index = keys.global_(_AGENTS)
    await move_hashes(client, keys, lock, kind=_AGENT, index=index, fields=_FIELDS, to_put=_agent)
    await client.delete(index, keys.of(_OWNERS, _AGENT))  # one command: both or neither


def _agent(agent_id: str, values: list[str | None], owner: Owner | None) -> Put | None:
    """An agent's record, created at its own creation time, its body the wire ``Agent`` as this version writes it."""
    config, created_at = values
    if config is None or created_at is None:
        return None  # converted by an earlier run (its hash deleted), or never whole
    moment = _moment(created_at)
    body = {"agent_id": agent_id, "agent_config": json.loads(config), "created_at": _wire_time(moment)}
    return Put(AGENT, agent_id, body, owner=owner, mode="upsert", at=moment.timestamp())


def _moment(iso: str) -> datetime:
    moment = datetime.fromisoformat(iso)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def _wire_time(moment: datetime) -> str:
    """A time as the wire model's JSON dump writes it (pydantic: ISO 8601, UTC as ``Z``)."""
    return moment.isoformat().replace("+00:00", "Z")
