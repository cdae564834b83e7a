"""Responses as Redis layout 14 stored them (hashes listed by indexes), and what layout 15 makes of them (records).

Layout 15 changed only what lists a response and says whose it is, so a test stores the responses through this
version's store (:func:`store_responses`: their hashes, turns, sessions and items are as layout 14 wrote them),
deletes their records, then writes what layout 14's scripts kept instead (:func:`write_layout_14`): each hash's
number, the ``responses`` index and each conversation's ``conv_responses`` by it, the owners in
``owners:response`` (one of a response long gone). :func:`assert_responses_moved` reads the records back through
the kernel after the upgrade: in creation order, by conversation, each with its owner and its creation as its
time, and pages filtered by owner.
"""

from __future__ import annotations

import dataclasses
import json

from legacy_agents import ALICE, BOB
from legacy_conversations import WHEN
from redis.asyncio import Redis
from store_records import complete, finished, response_start, text_item

from ferryman.ids import new_id, utcnow
from ferryman.storage.base import ConversationRecord, ResponseRecord, SessionRecord
from ferryman.storage.domain.kinds import RESPONSE
from ferryman.storage.domain.responses import ResponseHead, response_heads
from ferryman.storage.kernel.filters import Terms
from ferryman.storage.kernel.model import UNOWNED, Owner, principal_term
from ferryman.storage.kernel.ops import Delete
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.redis.store import RedisStore
from ferryman.storage.redis.store_keys import Keys

TALK = "conv_talk"
OTHER = "conv_other"

# In the order they were created, which is neither their ids' order nor their creation times'.
HEADS = [
    ResponseHead("resp_zeta", None, WHEN),
    ResponseHead("resp_alpha", TALK, WHEN + 60),
    ResponseHead("resp_mid", None, WHEN - 3600),
    ResponseHead("resp_beta", TALK, WHEN + 60),
    ResponseHead("resp_other", OTHER, WHEN + 120),
]
RESPONSE_OWNERS = {"resp_zeta": ALICE, "resp_alpha": BOB, "resp_other": ALICE}
ORPHAN_RESPONSE = "resp_deleted_long_ago"
"""An owner entry whose response is gone: the upgrade drops it."""
RUNNING = "resp_mid"
"""The response left running: it finishes after the upgrade."""


def owner_of(response_id: str) -> Owner | None:
    found = RESPONSE_OWNERS.get(response_id)
    return None if found is None else Owner.from_json(found)


async def store_responses(store: RedisStore) -> dict[str, ResponseRecord]:
    """The responses, stored by this version's store on a fresh database (no owners: layout 14 kept them beside)
    without their records; each as stored, by id. All but :data:`RUNNING` are finished, with an answer item in
    their conversation."""
    talks = {}
    for conversation_id in (TALK, OTHER):
        session = SessionRecord(new_id(), None, "conversation", utcnow())
        await store.create_session(session)
        talks[conversation_id] = ConversationRecord(conversation_id, session.session_id, {}, WHEN)
        await store.create_conversation(talks[conversation_id], [])
    stored = {}
    for head in HEADS:
        conversation = None if head.conversation_id is None else talks[head.conversation_id]
        start = response_start(f"q {head.response_id}", conversation)
        response = start.record.response.model_copy(update={"id": head.response_id, "created_at": head.created_at})
        start = dataclasses.replace(start, record=dataclasses.replace(start.record, response=response))
        await store.start_response(start)
        record = start.record
        if head.response_id != RUNNING:
            await complete(store, start.turn, "a")
            record = finished(record, "a")
            await store.finish_response(record, [], [text_item("a", role="assistant")])
        stored[head.response_id] = record
    await store.kernel.write([Delete(RESPONSE, head.response_id) for head in HEADS])
    return stored


async def write_layout_14(admin: Redis, keys: Keys) -> None:
    """What layout 14 kept beside each response's hash (over what an earlier call wrote: a conversion run
    again): its number, the indexes by it, the owners."""
    for head in HEADS:
        seq = int(await admin.incr(keys.global_("seq")))
        await admin.hset(keys.of("response", head.response_id), "seq", seq)
        await admin.zadd(keys.global_("responses"), {head.response_id: seq})
        if head.conversation_id is not None:
            await admin.zadd(keys.of("conv_responses", head.conversation_id), {head.response_id: seq})
    for response_id, owner in {**RESPONSE_OWNERS, ORPHAN_RESPONSE: BOB}.items():
        await admin.hset(keys.of("owners", "response"), response_id, json.dumps(owner))
    await admin.set(keys.global_("schema"), 14)


async def assert_responses_moved(kernel: Kernel) -> None:
    """Every response has its kernel record: in creation order, equal, with its owner, dated by its creation;
    a conversation's listed by its index in their order, and pages filter by owner."""
    records = response_heads(kernel)
    found = await records.stored_page()
    assert [item.value for item in found.items] == HEADS
    assert [item.rec.owner for item in found.items] == [owner_of(head.response_id) for head in HEADS]
    assert [item.rec.at for item in found.items] == [float(head.created_at) for head in HEADS]
    for conversation_id in (TALK, OTHER):
        listed = await records.page(where=("conversation_id", conversation_id))
        assert listed.items == [head for head in HEADS if head.conversation_id == conversation_id]
    newest = await records.page(desc=True, limit=2)
    assert (newest.items, newest.has_more) == (HEADS[:2:-1], True)
    for head in HEADS:
        one = await records.find(head.response_id)
        assert one is not None
        assert (one.value, one.rec.owner) == (head, owner_of(head.response_id))
    alice = Terms(frozenset({principal_term("key:alice")}))
    assert [head.response_id for head in await records.all(allow=alice)] == ["resp_zeta", "resp_other"]
    nobody = Terms(frozenset({UNOWNED}))
    assert [head.response_id for head in await records.all(allow=nobody)] == ["resp_mid", "resp_beta"]
    assert await records.find(ORPHAN_RESPONSE) is None
