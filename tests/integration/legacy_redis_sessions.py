"""Sessions as Redis layout 13 stored them (hashes), and what layout 14 makes of them (kernel records).

The sessions and owners go into layout 13's keys as its scripts wrote them, not through this version's code: a
hash each (``agent_id`` when it has an agent, ``name``, ``started_at``, ``seq``), an agent's session ids in
``agent_sessions:<agent_id>`` by number, the owners in ``owners:session`` (one of a session long gone). Their
turns are the turn store's, whose layout did not change: a test starts them through this version's store on the
old hashes. :func:`assert_sessions_moved` reads the sessions back through the kernel after the upgrade: in
creation order, equal, each with its owner and its start as its time, and an agent's listed by its index.
"""

from __future__ import annotations

import json
from datetime import timedelta

from legacy_agents import ALICE, BOB, WHEN
from redis.asyncio import Redis

from ferryman.storage import codec
from ferryman.storage.base import SessionRecord
from ferryman.storage.domain.agents import sessions
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import UNOWNED, Owner, principal_term
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.redis.store_keys import Keys

HELD_AGENT = "ferryman:fork-history"
"""The agent id of a holder of a deleted fork original's turns (``services.forks``)."""

# In the order they were created, which is neither their ids' order nor their starts'.
SESSIONS = [
    SessionRecord("sess_zeta", "agent_zeta", "first", WHEN),
    SessionRecord("sess_alpha", None, "response", WHEN + timedelta(minutes=1, microseconds=250000)),
    SessionRecord("sess_mid", "agent_zeta", 'it\'s "quoted"', WHEN - timedelta(hours=1)),
    SessionRecord("sess_held", HELD_AGENT, "fork history", WHEN + timedelta(minutes=2)),
    SessionRecord("sess_beta", "agent_alpha", "", WHEN),
]
SESSION_OWNERS = {"sess_zeta": ALICE, "sess_alpha": BOB, "sess_held": ALICE}
ORPHAN_SESSION = "sess_deleted_long_ago"
"""An owner entry whose session is gone: the upgrade drops it."""


def owner_of(session_id: str) -> Owner | None:
    found = SESSION_OWNERS.get(session_id)
    return None if found is None else Owner.from_json(found)


async def write_layout_13(admin: Redis, keys: Keys) -> None:
    """The sessions as layout 13's scripts kept them (over what an earlier call wrote: a conversion run again)."""
    for session in SESSIONS:
        anchor = keys.of("session", session.session_id)
        seq = int(await admin.incr(keys.global_("seq")))
        started_at = codec.dump_time(session.started_at) or ""
        await admin.hset(anchor, mapping={"name": session.session_name, "started_at": started_at, "seq": seq})
        if session.agent_id is not None:
            await admin.hset(anchor, "agent_id", session.agent_id)
            await admin.zadd(keys.of("agent_sessions", session.agent_id), {session.session_id: seq})
    for session_id, owner in {**SESSION_OWNERS, ORPHAN_SESSION: BOB}.items():
        await admin.hset(keys.of("owners", "session"), session_id, json.dumps(owner))
    await admin.set(keys.global_("schema"), 13)


async def assert_sessions_moved(kernel: Kernel) -> None:
    """Every session is a kernel record now: in creation order, equal, with its owner, dated by its start; an
    agent's are listed by its index in their order, and pages filter by owner."""
    records = sessions(kernel)
    found = await records.stored_page(parent=None)
    assert [item.value for item in found.items] == SESSIONS
    assert [item.rec.owner for item in found.items] == [owner_of(s.session_id) for s in SESSIONS]
    assert [item.rec.at for item in found.items] == [s.started_at.timestamp() for s in SESSIONS]
    for agent_id in ("agent_zeta", "agent_alpha", HELD_AGENT):
        listed = await records.page(parent=None, where=("agent_id", agent_id))
        assert listed.items == [s for s in SESSIONS if s.agent_id == agent_id]
    for session in SESSIONS:
        one = await records.find(session.session_id)
        assert one is not None
        assert (one.value, one.rec.owner) == (session, owner_of(session.session_id))
    alice = Terms(frozenset({principal_term("key:alice")}))
    assert [s.session_id for s in await records.all(allow=alice, parent=None)] == ["sess_zeta", "sess_held"]
    nobody = Terms(frozenset({UNOWNED}))
    assert [s.session_id for s in await records.all(allow=nobody, parent=None)] == ["sess_mid", "sess_beta"]
    assert await records.find(ORPHAN_SESSION) is None
