"""Redis layout 14: sessions become records of the storage kernel.

Layout 13 kept each session in a hash (``session:<id>``: ``agent_id`` when it has an agent, ``name``,
``started_at`` as ISO text, ``seq``, the number it was created with, and the turn store's ``running`` and
``history_epoch``), an agent's session ids in ``agent_sessions:<agent_id>`` by number, and the owners in the
``owners:session`` hash. No index listed every session (those the Responses or Conversations API opened have no
agent), so the conversion first lists the hashes by a scan into a sorted set of its own, ``schema_sessions``, by
number. Each session is then written through the kernel itself (so its layout is the kernel's), in that order,
dated by its start, its body the ``SessionRecord``'s fields, with its owner; then its hash loses ``name`` and
``started_at`` and keeps the rest: it is the session's anchor, where its turns hang, and the turn scripts read
``seq``, ``agent_id`` and ``running`` there. The turns stay. The owners, the conversion's own index and the
agents' indexes go once every session is a record.

Every write is an upsert, which keeps an existing record's number, time and owner, and a session whose hash has
no name was converted already: a conversion that died midway, run again, lists the hashes again and writes the
rest after them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.storage import codec
from ferryman.storage.domain.kinds import SESSION
from ferryman.storage.kernel.model import Owner
from ferryman.storage.kernel.ops import Put
from ferryman.storage.redis.record_moves import delete_scanned, move_hashes
from ferryman.storage.redis.store_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_SESSION = "session"
_AGENT_SESSIONS = "agent_sessions"
_OWNERS = "owners"
_ORDER = "schema_sessions"
"""The conversion's index of the sessions' hashes by number, deleted with the layout it converts."""
_FIELDS = ("agent_id", "name", "started_at")
_MOVED = ("name", "started_at")
"""The fields that go from a session's hash; ``seq``, ``agent_id`` and the turn store's fields stay."""
_SCAN_BATCH = 500


async def move_sessions(client: Redis, keys: Keys, lock: Lock, escaped: Callable[[str], str]) -> None:
    """Write every session of layout 13 as a kernel record with its owner, then delete the old keys.

    Args:
        client: The deployment's client.
        keys: Its keys.
        lock: The upgrade's lock, renewed as batches go.
        escaped: A prefix as a literal in a ``SCAN MATCH`` pattern.
    """
    order = keys.global_(_ORDER)
    await _list_sessions(client, keys, lock, order, escaped(keys.base(_SESSION)) + "*")
    await move_hashes(client, keys, lock, kind=_SESSION, index=order, fields=_FIELDS, to_put=_session, drop=_MOVED)
    await client.delete(order, keys.of(_OWNERS, _SESSION))  # one command: all or none
    await delete_scanned(client, lock, escaped(keys.base(_AGENT_SESSIONS)) + "*")


async def _list_sessions(client: Redis, keys: Keys, lock: Lock, order: str, match: str) -> None:
    """Index every session's hash by its number in ``order`` (a hash without one, never written by layout 13's
    scripts, goes last)."""
    base = keys.base(_SESSION)
    batch: list[str] = []

    async def index() -> None:
        async with client.pipeline(transaction=False) as pipe:
            for key in batch:
                pipe.hget(key, "seq")
            numbers = cast(list[str | None], await pipe.execute())
        numbered = zip(batch, numbers, strict=True)
        await client.zadd(order, {key.removeprefix(base): "+inf" if seq is None else int(seq) for key, seq in numbered})
        batch.clear()
        await lock.reacquire()

    async for key in client.scan_iter(match=match, count=_SCAN_BATCH):
        batch.append(key)
        if len(batch) == _SCAN_BATCH:  # many sessions must not outlast the lock
            await index()
    if batch:
        await index()


def _session(session_id: str, values: list[str | None], owner: Owner | None) -> Put | None:
    """A session's record, dated by its start, as a session's creation writes it."""
    agent_id, name, started_at = values
    if name is None or started_at is None:
        return None  # converted by an earlier run (its fields deleted)
    body = {"session_id": session_id, "agent_id": agent_id, "session_name": name, "started_at": started_at}
    at = codec.require_time(started_at).timestamp()
    return Put(SESSION, session_id, body, owner=owner, mode="upsert", at=at)
