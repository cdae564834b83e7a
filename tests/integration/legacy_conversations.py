"""Conversations as the versions before the kernel stored them (a table, or Redis hashes), and what they become.

The same conversations and owners go into the old SQL table at ``0022_record_terms_hash``
(``test_sql_migrations``, which writes its rows) and the old Redis layout 12 (``test_redis_upgrade``), written as
those versions wrote them, not through this version's code; the first conversation has items and a response,
which must come through untouched. :func:`assert_conversations_moved` reads the conversations back through the
kernel after the upgrade: in their old order, equal, each with its owner, and a caller's page filtered in the
query.
"""

from __future__ import annotations

import json

from legacy_agents import ALICE, BOB
from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from ferryman.storage.base import ConversationRecord
from ferryman.storage.domain.conversations import conversations
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import UNOWNED, Owner, attribute_term, principal_term
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.redis.store_keys import Keys

WHEN = 1740830400
"""2025-03-01 12:00 UTC in Unix seconds, as conversations keep their times."""

# In the order they were created, which is neither their ids' order nor (time, id)'s.
CONVERSATIONS = [
    ConversationRecord("conv_zeta", "sess_zeta", {"topic": "ferries", "lang": "en"}, WHEN),
    ConversationRecord("conv_mid", "sess_mid", {}, WHEN + 60),
    ConversationRecord("conv_alpha", "sess_alpha", {"note": 'it\'s "quoted"'}, WHEN + 60),
]
CONVERSATION_OWNERS = {"conv_zeta": ALICE, "conv_alpha": BOB}
ORPHAN_CONVERSATION = "conv_deleted_long_ago"
"""An owner row whose conversation is gone: the upgrade drops it."""

# What the responses store keeps of conv_zeta.
TALKED = "conv_zeta"
ITEMS = {
    "msg_in": {"type": "message", "id": "msg_in", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    "msg_out": {"type": "message", "id": "msg_out", "role": "assistant", "content": []},
}
RESPONSE_ID = "resp_zeta"


def owner_of(conversation_id: str) -> Owner | None:
    found = CONVERSATION_OWNERS.get(conversation_id)
    return None if found is None else Owner.from_json(found)


# -- Redis layout 12 ------------------------------------------------------------------------------------------------


async def write_layout_12(admin: Redis, keys: Keys) -> list[str]:
    """The conversations as layout 12 kept them (hashes, the index by number, owners, one orphan owner) and what
    the responses store keeps of the first (its session's set, whose key is returned and which layout 19
    deletes, its items, which layout 17 moves into the kernel, and its responses' index, which layout 15
    deletes: their records list them)."""
    for conversation in CONVERSATIONS:
        seq = int(await admin.incr(keys.global_("seq")))
        mapping: dict[FieldT, EncodableT] = {
            "session_id": conversation.session_id,
            "metadata": json.dumps(conversation.metadata),
            "created_at": conversation.created_at,
        }
        await admin.hset(keys.of("conversation", conversation.conversation_id), mapping=mapping)
        await admin.zadd(keys.global_("conversations"), {conversation.conversation_id: seq})
    for rid, owner in {**CONVERSATION_OWNERS, ORPHAN_CONVERSATION: ALICE}.items():
        await admin.hset(keys.of("owners", "conversation"), rid, json.dumps(owner))
    seq = int(await admin.incr(keys.global_("seq")))
    await admin.zadd(keys.of("items", TALKED), {item_id: seq + n for n, item_id in enumerate(ITEMS)})
    await admin.zadd(keys.of("conv_responses", TALKED), {RESPONSE_ID: seq})
    await admin.hset(keys.of("item_bodies", TALKED), mapping={k: json.dumps(v) for k, v in ITEMS.items()})
    await admin.sadd(keys.of("session_convs", "sess_zeta"), TALKED)
    await admin.set(keys.global_("schema"), 12)
    return [keys.of("session_convs", "sess_zeta")]


# -- after the upgrade ----------------------------------------------------------------------------------------------


async def assert_conversations_moved(kernel: Kernel) -> None:
    """Every conversation is a kernel record now: in creation order, equal, with its owner; pages filter by
    owner."""
    records = conversations(kernel)
    found = await records.stored_page(parent="")
    assert [item.value for item in found.items] == CONVERSATIONS
    assert [item.rec.owner for item in found.items] == [owner_of(c.conversation_id) for c in CONVERSATIONS]
    assert [item.rec.at for item in found.items] == [float(c.created_at) for c in CONVERSATIONS]
    for conversation in CONVERSATIONS:
        one = await records.find(conversation.conversation_id)
        assert one is not None
        assert (one.value, one.rec.owner) == (conversation, owner_of(conversation.conversation_id))
    alice = Terms(frozenset({principal_term("key:alice")}))
    assert [c.conversation_id for c in await records.all(allow=alice)] == ["conv_zeta"]
    blue = Terms(frozenset({attribute_term("teams", "blue")}))
    assert [c.conversation_id for c in await records.all(allow=blue)] == ["conv_alpha"]
    nobody = Terms(frozenset({UNOWNED}))
    assert [c.conversation_id for c in await records.all(allow=nobody)] == ["conv_mid"]
    assert await records.find(ORPHAN_CONVERSATION) is None
