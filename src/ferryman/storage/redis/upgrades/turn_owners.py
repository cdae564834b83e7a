"""Redis layout 16: a turn's owner moves into the turn's own hash.

Layout 15 kept the owners of turns in the ``owners:turn`` hash (turn id -> owner JSON), which no deletion of a
turn touched: the owners of deleted turns stayed there. Each owner whose turn's hash (``turn:<id>``) is still
there becomes its ``owner`` field, a batch at a time; the others are dropped. Then ``owners:turn`` goes, and with
it any other ``owners:<kind>`` hash an earlier layout left (each conversion into the kernel deleted its own
kind's; no layout wrote one for another kind).

Writing an owner into its turn's hash again writes the same value, and ``owners:turn`` goes only once every
owner is written: a conversion that died midway, run again, scans it whole again and finishes it.
"""

from __future__ import annotations

from collections.abc import Callable

from redis.asyncio import Redis
from redis.asyncio.lock import Lock

from ferryman.storage.redis.record_moves import SCAN_BATCH, delete_scanned
from ferryman.storage.redis.store_keys import Keys

# An upgrade keeps its own copy of the layout it converts: the application's has moved on.
_TURN = "turn"
_OWNERS = "owners"
_INTO_TURNS = """
for i, turn in ipairs(KEYS) do
  if redis.call('EXISTS', turn) == 1 then redis.call('HSET', turn, 'owner', ARGV[i]) end
end
"""
"""Each owner (``ARGV``) into its turn's hash (``KEYS``), unless the turn is gone: ``HSET`` would recreate it."""


async def move_turn_owners(client: Redis, keys: Keys, lock: Lock, escaped: Callable[[str], str]) -> None:
    """Write every owner of layout 15's ``owners:turn`` into its turn's hash, then delete every ``owners:*`` hash.

    Args:
        client: The deployment's client.
        keys: Its keys.
        lock: The upgrade's lock, renewed as batches go.
        escaped: A prefix as a literal in a ``SCAN MATCH`` pattern.
    """
    batch: dict[str, str] = {}
    async for turn_id, owner in client.hscan_iter(keys.of(_OWNERS, _TURN), count=SCAN_BATCH):
        batch[turn_id] = owner
        if len(batch) == SCAN_BATCH:  # many owners must not outlast the lock
            await _write_owners(client, keys, batch)
            batch.clear()
            await lock.reacquire()
    await _write_owners(client, keys, batch)
    await delete_scanned(client, lock, escaped(keys.base(_OWNERS)) + "*")


async def _write_owners(client: Redis, keys: Keys, owners: dict[str, str]) -> None:
    """Write each owner into its turn's hash, if that turn is still there, in one script."""
    if owners:
        hashes = [keys.of(_TURN, turn_id) for turn_id in owners]
        await client.eval(_INTO_TURNS, len(hashes), *hashes, *owners.values())
