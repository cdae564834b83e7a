"""Sessions as the versions before the kernel stored them (a table), and what they become.

The same sessions and owners go into the old SQL table at ``0023_conversations_on_kernel``
(``test_sql_migrations``, which writes their rows and their turns as those versions wrote them, not through this
version's code). :func:`assert_sessions_moved` reads the sessions back through the kernel after the upgrade: in
their old order, equal, each with its owner, dated by its start, listed by its agent, and a caller's page filtered
in the query.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from legacy_agents import ALICE, BOB

from ferryman.storage.base import SessionRecord
from ferryman.storage.domain.agents import SessionCodec, sessions
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import UNOWNED, Owner, attribute_term, principal_term
from ferryman.storage.kernel.protocol import Kernel

WHEN = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
HELD_AGENT = "ferryman:fork-history"
"""What a holder of forks' shared turns names as its agent (``services.forks.HELD_AGENT``)."""

# In the order they were created, which is neither their ids' order nor their starts' (a replica's clock may lag).
SESSIONS = [
    SessionRecord("sess_zeta", "agent_zeta", "first", WHEN),
    # Stored with another offset than UTC's (PostgreSQL keeps the instant): the record holds it in UTC.
    SessionRecord(
        "sess_alpha",
        "agent_alpha",
        'it\'s "quoted" ⛴',
        datetime(2025, 3, 1, 14, 1, 0, 250000, tzinfo=timezone(timedelta(hours=2))),
    ),
    SessionRecord("sess_resp", None, "response", WHEN + timedelta(minutes=2)),
    SessionRecord("sess_mid", "agent_zeta", "second", WHEN - timedelta(seconds=1)),
    SessionRecord("sess_held", HELD_AGENT, "fork history", WHEN + timedelta(minutes=3, microseconds=1)),
    SessionRecord("sess_beta", "agent_zeta", "", WHEN + timedelta(minutes=4)),
]
SESSION_OWNERS = {"sess_zeta": ALICE, "sess_alpha": BOB, "sess_resp": ALICE, "sess_beta": BOB}
ORPHAN_SESSION = "sess_deleted_long_ago"
"""An owner row whose session is gone: the upgrade drops it."""


def owner_of(session_id: str) -> Owner | None:
    found = SESSION_OWNERS.get(session_id)
    return None if found is None else Owner.from_json(found)


def of_agent(agent_id: str) -> list[str]:
    """The ids of an agent's sessions, in creation order."""
    return [s.session_id for s in SESSIONS if s.agent_id == agent_id]


async def assert_sessions_moved(kernel: Kernel) -> None:
    """Every session is a kernel record now: a root, in creation order, equal, with its owner, dated by its start,
    its body what the application writes; listed by agent; pages filter by owner."""
    records = sessions(kernel)
    found = await records.stored_page(parent="")
    assert [item.value for item in found.items] == SESSIONS
    assert [item.rec.owner for item in found.items] == [owner_of(s.session_id) for s in SESSIONS]
    assert [item.rec.at for item in found.items] == [s.started_at.timestamp() for s in SESSIONS]
    assert [item.rec.body for item in found.items] == [SessionCodec().dump(s) for s in SESSIONS]
    for session in SESSIONS:
        one = await records.find(session.session_id)
        assert one is not None
        assert (one.value, one.rec.owner) == (session, owner_of(session.session_id))
    for agent_id in ("agent_zeta", "agent_alpha", HELD_AGENT, "agent_none"):
        page = await records.page(parent=None, where=("agent_id", agent_id))
        assert [s.session_id for s in page.items] == of_agent(agent_id), agent_id
    alice = Terms(frozenset({principal_term("key:alice")}))
    assert [s.session_id for s in await records.all(allow=alice)] == ["sess_zeta", "sess_resp"]
    blue = Terms(frozenset({attribute_term("teams", "blue")}))
    assert [s.session_id for s in await records.all(allow=blue)] == ["sess_alpha", "sess_beta"]
    nobody = Terms(frozenset({UNOWNED}))
    assert [s.session_id for s in await records.all(allow=nobody)] == ["sess_mid", "sess_held"]
    mine = await records.page(parent=None, where=("agent_id", "agent_zeta"), allow=alice)
    assert [s.session_id for s in mine.items] == ["sess_zeta"]
    assert await records.find(ORPHAN_SESSION) is None
