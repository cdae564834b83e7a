"""Turns' owners as Redis layout 15 kept them (a side hash), and what layout 16 makes of them (a turn hash's field).

Layout 16 changed only where a turn's owner is kept, so a test stores the turns through this version's store
(:func:`store_turns`: their hashes are as layout 15 wrote them once their ``owner`` field goes), then writes what
layout 15's ``TURN_START`` kept instead (:func:`write_layout_15`): the ``owners:turn`` hash, turn id -> owner JSON,
holding the owners of turns deleted long ago too (more of them than one batch of the conversion), and an
``owners:agent`` hash that no layout should have left. :func:`assert_owners_moved` checks the result.
"""

from __future__ import annotations

import json
from typing import Any

from legacy_agents import ALICE, BOB
from redis.asyncio import Redis
from store_records import complete, response_start, turn_of, user

from ferryman.ids import new_id, utcnow
from ferryman.storage.base import SessionRecord
from ferryman.storage.kernel.model import Owner
from ferryman.storage.redis.store import RedisStore
from ferryman.storage.redis.store_keys import Keys

ORPHANS = [f"turn_deleted_long_ago_{i:04}" for i in range(1100)]
"""Owner entries whose turns are gone: the upgrade drops them, and writes no hash for them."""
LEFT = ("agent", "agent_deleted_long_ago")
"""An entry of another kind's side hash, which the layout that moved its kind should have deleted."""


async def store_turns(store: RedisStore) -> dict[str, dict[str, Any] | None]:
    """Turns stored by this version's store, each its owner's JSON (None: unowned), by turn id: Alice's (finished)
    and Bob's (left running) in an agent's session, one of no one's, and a response's turn, Alice's."""
    session = SessionRecord(new_id(), "agent_1", "s", utcnow())
    await store.create_session(session)
    owners: dict[str, dict[str, Any] | None] = {}
    for text, owner, ends in (("alice's", ALICE, True), ("no one's", None, True), ("bob's", BOB, False)):
        record = turn_of(session, text)
        await store.start_turn(record, [user(text)], owner=None if owner is None else Owner.from_json(owner))
        if ends:
            await complete(store, record, "a")
        owners[record.turn_id] = owner
    responded = response_start("q")
    await store.start_response(responded, owner=Owner.from_json(ALICE))
    owners[responded.turn.turn_id] = ALICE
    return owners


async def write_layout_15(admin: Redis, keys: Keys, owners: dict[str, dict[str, Any] | None]) -> None:
    """The turns' owners as layout 15 kept them: beside their hashes, not in them (over what an earlier call wrote:
    a conversion run again)."""
    for turn_id in owners:
        await admin.hdel(keys.of("turn", turn_id), "owner")
    side = {turn_id: json.dumps(owner) for turn_id, owner in owners.items() if owner is not None}
    await admin.hset(keys.of("owners", "turn"), mapping={**side, **dict.fromkeys(ORPHANS, json.dumps(BOB))})
    await admin.hset(keys.of("owners", LEFT[0]), LEFT[1], json.dumps(ALICE))
    await admin.set(keys.global_("schema"), 15)


async def assert_owners_moved(store: RedisStore, admin: Redis, owners: dict[str, dict[str, Any] | None]) -> None:
    """Each owned turn's owner is in its hash (read back by ``turn_owners``), no orphan got a hash, and no side
    hash of owners is left."""
    keys = store._keys
    found = await store.turn_owners([*owners, *ORPHANS])
    assert found == {turn_id: Owner.from_json(owner) for turn_id, owner in owners.items() if owner is not None}
    assert await admin.exists(*(keys.of("turn", turn_id) for turn_id in ORPHANS)) == 0
    assert [key async for key in admin.scan_iter(match=f"{keys.base('owners')}*")] == []
