"""Responses as the versions before the kernel listed them (a table, their owners beside it), and what they become.

The same responses and owners go into the old SQL tables at ``0024_sessions_on_kernel`` (``test_sql_migrations``,
which writes their rows, turns, events and items as those versions wrote them, not through this version's code).
:func:`assert_responses_moved` reads their records back through the kernel after the upgrade: in their old order,
each with its owner, dated by its creation, listed by conversation, and a caller's page filtered in the query.
"""

from __future__ import annotations

from legacy_agents import ALICE, BOB

from ferryman.storage.domain.records import FieldsCodec
from ferryman.storage.domain.responses import ResponseHead, response_heads
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import UNOWNED, Owner, attribute_term, principal_term
from ferryman.storage.kernel.protocol import Kernel

WHEN = 1740830400
"""2025-03-01 12:00 UTC in Unix seconds, as responses keep their times."""
TALKED, OTHER = "conv_talk", "conv_other"

# In the order they were created, which is neither their ids' order nor their times' (a replica's clock may lag).
RESPONSES = [
    ResponseHead("resp_zeta", TALKED, WHEN),
    ResponseHead("resp_alpha", None, WHEN + 60),
    ResponseHead("resp_mid", TALKED, WHEN - 1),
    ResponseHead("resp_other", OTHER, WHEN + 60),
    ResponseHead("resp_beta", None, WHEN + 120),
    ResponseHead("resp_last", TALKED, WHEN + 180),
]
RESPONSE_OWNERS = {"resp_zeta": ALICE, "resp_alpha": BOB, "resp_other": ALICE, "resp_last": BOB}
ORPHAN_RESPONSE = "resp_deleted_long_ago"
"""An owner row whose response is gone: the upgrade drops it."""


def owner_of(response_id: str) -> Owner | None:
    found = RESPONSE_OWNERS.get(response_id)
    return None if found is None else Owner.from_json(found)


def in_conversation(conversation_id: str) -> list[str]:
    """The ids of a conversation's responses, in creation order."""
    return [r.response_id for r in RESPONSES if r.conversation_id == conversation_id]


async def assert_responses_moved(kernel: Kernel) -> None:
    """Every response has its kernel record now: a root, in creation order, with its owner, dated by its creation,
    its body what the application writes; listed by conversation; pages filter by owner."""
    records = response_heads(kernel)
    found = await records.stored_page(parent="")
    assert [item.value for item in found.items] == RESPONSES
    assert [item.rec.owner for item in found.items] == [owner_of(r.response_id) for r in RESPONSES]
    assert [item.rec.at for item in found.items] == [float(r.created_at) for r in RESPONSES]
    assert [item.rec.body for item in found.items] == [FieldsCodec(ResponseHead).dump(r) for r in RESPONSES]
    for response in RESPONSES:
        one = await records.find(response.response_id)
        assert one is not None
        assert (one.value, one.rec.owner) == (response, owner_of(response.response_id))
    for conversation_id in (TALKED, OTHER, "conv_none"):
        page = await records.page(parent=None, where=("conversation_id", conversation_id))
        assert [r.response_id for r in page.items] == in_conversation(conversation_id), conversation_id
    alice = Terms(frozenset({principal_term("key:alice")}))
    assert [r.response_id for r in await records.all(allow=alice)] == ["resp_zeta", "resp_other"]
    blue = Terms(frozenset({attribute_term("teams", "blue")}))
    assert [r.response_id for r in await records.all(allow=blue)] == ["resp_alpha", "resp_last"]
    nobody = Terms(frozenset({UNOWNED}))
    assert [r.response_id for r in await records.all(allow=nobody)] == ["resp_mid", "resp_beta"]
    mine = await records.page(parent=None, where=("conversation_id", TALKED), allow=blue)
    assert [r.response_id for r in mine.items] == ["resp_last"]
    assert await records.find(ORPHAN_RESPONSE) is None
