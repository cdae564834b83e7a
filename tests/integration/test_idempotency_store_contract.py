"""The storage contract of idempotency keys, on every backend of ``storage_backends.BACKENDS``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from storage_backends import BACKENDS, vector_store_record

from ferryman.api.agents import Agent, AgentConfig, TurnStatus
from ferryman.api.responses import InputText, MessageItem
from ferryman.errors import ConflictError, IdempotencyKeyInUseError, NotFoundError
from ferryman.ids import new_id, utcnow
from ferryman.storage.base import (
    ConversationRecord,
    IdempotencyKeyHeldError,
    IdempotencyRecord,
    KeySettlement,
    SessionRecord,
    Store,
    TurnRecord,
)
from ferryman.storage.domain.agents import agents, sessions
from ferryman.storage.domain.conversations import conversations
from ferryman.storage.domain.file_batches import file_batch
from ferryman.storage.domain.vector_stores import vector_stores
from ferryman.storage.kernel.model import Owner
from ferryman.storage.knowledge import FileBatchRecord, VectorStoreFileRecord

pytestmark = pytest.mark.anyio

DAY = timedelta(hours=24)
OWNER = Owner("api_key", "alice")


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield opened


def claim(
    key: str = "key-1", owner: str = "", fingerprint: str = "fp-1", lifetime: timedelta = DAY
) -> IdempotencyRecord:
    now = datetime.now(UTC)
    return IdempotencyRecord(owner, key, uuid.uuid4().hex, fingerprint, now, now + lifetime)


def same_moment(a: datetime, b: datetime) -> bool:
    return abs((a - b).total_seconds()) < 0.001


async def test_a_free_key_is_claimed_and_a_second_claim_gets_the_pending_record(store: Store) -> None:
    first = claim()
    assert await store.claim_idempotency_key(first, first.created_at) is None
    held = await store.claim_idempotency_key(claim(fingerprint="fp-2"), datetime.now(UTC))
    assert held is not None
    assert (held.owner, held.key, held.token, held.fingerprint, held.result) == ("", "key-1", first.token, "fp-1", None)
    assert same_moment(held.created_at, first.created_at) and same_moment(held.expires_at, first.expires_at)


async def test_a_completed_key_returns_its_result_and_new_expiry(store: Store) -> None:
    first = claim(lifetime=timedelta(minutes=1))
    await store.claim_idempotency_key(first, first.created_at)
    assert await store.complete_idempotency_key(first, '{"status": 200}', first.created_at + DAY)
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and held.result == '{"status": 200}' and held.token == first.token
    assert same_moment(held.expires_at, first.created_at + DAY)


async def test_an_empty_result_is_a_result(store: Store) -> None:
    first = claim()
    await store.claim_idempotency_key(first, first.created_at)
    assert await store.complete_idempotency_key(first, "", first.expires_at)
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and held.result == ""


async def test_an_expired_key_counts_as_absent(store: Store) -> None:
    first = claim()
    await store.claim_idempotency_key(first, first.created_at)
    await store.complete_idempotency_key(first, "done", first.expires_at)
    later = claim(fingerprint="fp-2")
    assert await store.claim_idempotency_key(later, first.expires_at + timedelta(seconds=1)) is None
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and held.token == later.token and held.result is None and held.fingerprint == "fp-2"


async def test_keys_are_scoped_by_owner(store: Store) -> None:
    assert await store.claim_idempotency_key(claim(owner="alice"), datetime.now(UTC)) is None
    assert await store.claim_idempotency_key(claim(owner="bob"), datetime.now(UTC)) is None
    # No owner and key can make another pair's record.
    assert await store.claim_idempotency_key(claim(owner="a", key="b:c"), datetime.now(UTC)) is None
    assert await store.claim_idempotency_key(claim(owner="a:b", key="c"), datetime.now(UTC)) is None
    held = await store.claim_idempotency_key(claim(owner="alice"), datetime.now(UTC))
    assert held is not None and held.owner == "alice"


async def test_release_frees_a_pending_key_only(store: Store) -> None:
    pending = claim("pending")
    await store.claim_idempotency_key(pending, pending.created_at)
    await store.release_idempotency_key(pending)
    assert await store.claim_idempotency_key(claim("pending"), datetime.now(UTC)) is None

    done = claim("done")
    await store.claim_idempotency_key(done, done.created_at)
    await store.complete_idempotency_key(done, "result", done.expires_at)
    await store.release_idempotency_key(done)
    held = await store.claim_idempotency_key(claim("done"), datetime.now(UTC))
    assert held is not None and held.result == "result"


async def test_an_old_claim_cannot_touch_the_claim_that_replaced_it(store: Store) -> None:
    old = claim()
    await store.claim_idempotency_key(old, old.created_at)
    new = claim()
    assert await store.claim_idempotency_key(new, old.expires_at + timedelta(seconds=1)) is None
    assert not await store.complete_idempotency_key(old, "stale", new.expires_at)
    assert not await store.renew_idempotency_key(old, new.expires_at + DAY)
    await store.release_idempotency_key(old)
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and held.token == new.token and held.result is None
    assert same_moment(held.expires_at, new.expires_at)


async def test_renew_moves_the_expiry_of_a_pending_claim(store: Store) -> None:
    first = claim(lifetime=timedelta(seconds=30))
    await store.claim_idempotency_key(first, first.created_at)
    assert await store.renew_idempotency_key(first, first.created_at + timedelta(minutes=5))
    # Past the first expiry, the renewed claim still holds the key.
    held = await store.claim_idempotency_key(claim(), first.created_at + timedelta(minutes=1))
    assert held is not None and held.token == first.token
    await store.release_idempotency_key(first)
    assert not await store.renew_idempotency_key(first, first.expires_at)


async def test_claims_racing_for_one_key_let_exactly_one_win(store: Store) -> None:
    claims = [claim(fingerprint=f"fp-{i}") for i in range(8)]
    now = datetime.now(UTC)
    outcomes = await asyncio.gather(*(store.claim_idempotency_key(c, now) for c in claims))
    winners = [c for c, outcome in zip(claims, outcomes, strict=True) if outcome is None]
    assert len(winners) == 1
    assert {o.token for o in outcomes if o is not None} == {winners[0].token}


async def test_a_claim_is_stored_as_given(store: Store) -> None:
    first = replace(claim(key="k" * 255, owner="owner-1"), fingerprint="f" * 64)
    await store.claim_idempotency_key(first, first.created_at)
    held = await store.claim_idempotency_key(replace(first, token="other"), first.created_at)
    assert held is not None and (held.key, held.owner, held.fingerprint) == (first.key, "owner-1", "f" * 64)


async def test_renew_leaves_a_completed_key_alone(store: Store) -> None:
    first = claim(lifetime=timedelta(minutes=1))
    await store.claim_idempotency_key(first, first.created_at)
    await store.complete_idempotency_key(first, "done", first.created_at + DAY)
    assert not await store.renew_idempotency_key(first, first.created_at + timedelta(minutes=2))
    held = await store.claim_idempotency_key(claim(), first.created_at + timedelta(hours=1))
    assert held is not None and held.result == "done" and same_moment(held.expires_at, first.created_at + DAY)


def _turn(session_id: str, status: TurnStatus = "in_progress") -> TurnRecord:
    return TurnRecord(new_id(), session_id, None, status, [], utcnow())


async def _session(store: Store) -> str:
    session = SessionRecord(new_id(), None, "s", utcnow())
    await store.create_session(session)
    return session.session_id


async def test_a_turn_start_stores_its_keys_outcome_with_it(store: Store) -> None:
    first = claim()
    await store.claim_idempotency_key(first, first.created_at)
    turn = _turn(await _session(store))
    await store.start_turn(turn, [], settle=KeySettlement(first, '{"turn": 1}', first.created_at + DAY))
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and held.result == '{"turn": 1}' and same_moment(held.expires_at, first.created_at + DAY)
    assert (await store.get_turn_record(turn.session_id, turn.turn_id)).status == "in_progress"


async def test_a_turn_start_whose_claim_was_taken_over_stores_nothing(store: Store) -> None:
    lapsed = claim(lifetime=timedelta(milliseconds=1))
    await store.claim_idempotency_key(lapsed, lapsed.created_at)
    taker = claim()
    assert await store.claim_idempotency_key(taker, taker.created_at + timedelta(seconds=1)) is None
    turn = _turn(await _session(store))
    with pytest.raises(IdempotencyKeyInUseError):
        await store.start_turn(turn, [], settle=KeySettlement(lapsed, '{"turn": 1}', lapsed.created_at + DAY))
    with pytest.raises(NotFoundError):
        await store.get_turn_record(turn.session_id, turn.turn_id)
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and held.token == taker.token and held.result is None
    # The session stays free: a turn starts in it.
    await store.start_turn(_turn(turn.session_id), [])


async def test_a_refused_turn_start_leaves_its_key_pending(store: Store) -> None:
    session_id = await _session(store)
    await store.start_turn(_turn(session_id), [])
    first = claim()
    await store.claim_idempotency_key(first, first.created_at)
    with pytest.raises(ConflictError):  # the session's turn still runs
        await store.start_turn(_turn(session_id), [], settle=KeySettlement(first, '{"turn": 2}', first.expires_at))
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and held.token == first.token and held.result is None


async def test_a_resume_stores_its_keys_outcome_with_it_or_nothing(store: Store) -> None:
    session_id = await _session(store)
    turn = _turn(session_id)
    await store.start_turn(turn, [])
    turn.status = "awaiting_input"
    await store.finish_turn(turn)
    lapsed = claim(lifetime=timedelta(milliseconds=1))
    await store.claim_idempotency_key(lapsed, lapsed.created_at)
    assert await store.claim_idempotency_key(claim(key="key-2"), datetime.now(UTC)) is None
    taker = claim()
    assert await store.claim_idempotency_key(taker, taker.created_at + timedelta(seconds=1)) is None
    lease = utcnow() + timedelta(minutes=1)
    with pytest.raises(IdempotencyKeyInUseError):
        await store.claim_resume(session_id, turn.turn_id, lease, settle=KeySettlement(lapsed, "{}", lapsed.expires_at))
    assert (await store.get_turn_record(session_id, turn.turn_id)).status == "awaiting_input"
    settle = KeySettlement(taker, '{"turn": "resumed"}', taker.created_at + DAY)
    assert (await store.claim_resume(session_id, turn.turn_id, lease, settle=settle)).record.status == "in_progress"
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and held.result == '{"turn": "resumed"}'


async def test_a_keyed_write_claims_its_key_with_the_records_it_makes(store: Store) -> None:
    """A create answered with its record: the key is claimed by the write that makes it, or nothing is written."""
    first = claim()
    made = Agent(agent_id=new_id(), agent_config=AgentConfig(model="m", instructions="i"), created_at=utcnow())
    records = agents(store.kernel)
    settle = KeySettlement(first, '{"record": 1}', first.created_at + DAY, claiming=True)
    assert len(await store.write_keyed([records.put(made, owner=OWNER)], settle)) == 1  # the put's result
    found = await records.find(made.agent_id)
    assert found is not None and found.rec.owner == OWNER
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and (held.token, held.result) == (first.token, '{"record": 1}')
    again = made.model_copy(update={"agent_id": new_id()})
    repeat = KeySettlement(claim(), '{"record": 2}', first.created_at + DAY, claiming=True)
    with pytest.raises(IdempotencyKeyHeldError) as raised:
        await store.write_keyed([records.put(again)], repeat)
    assert (raised.value.result, raised.value.token) == ('{"record": 1}', first.token)
    assert await records.find(again.agent_id) is None


async def test_a_keyed_write_the_kernel_refuses_stores_no_key(store: Store) -> None:
    made = Agent(agent_id=new_id(), agent_config=AgentConfig(model="m", instructions="i"), created_at=utcnow())
    records = agents(store.kernel)
    await records.create(made)
    first = claim()
    with pytest.raises(ConflictError):  # its id is taken
        await store.write_keyed([records.put(made)], KeySettlement(first, "{}", first.expires_at, claiming=True))
    assert await store.claim_idempotency_key(claim(), datetime.now(UTC)) is None  # the key was free


async def test_a_keyed_session_is_stored_with_its_keys_outcome_or_not_at_all(store: Store) -> None:
    first = claim()
    session = SessionRecord(new_id(), None, "s", utcnow())
    await store.create_session(session, settle=KeySettlement(first, '{"s": 1}', first.expires_at, claiming=True))
    assert (await sessions(store.kernel).get(session.session_id)).session_name == "s"
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and held.result == '{"s": 1}'
    other = SessionRecord(new_id(), None, "t", utcnow())
    with pytest.raises(IdempotencyKeyHeldError):
        await store.create_session(other, settle=KeySettlement(claim(), "{}", first.expires_at, claiming=True))
    assert await sessions(store.kernel).find(other.session_id) is None
    pending = claim(key="key-2")
    await store.claim_idempotency_key(pending, pending.created_at)
    third = SessionRecord(new_id(), None, "u", utcnow())
    await store.create_session(third, settle=KeySettlement(pending, '{"s": 3}', pending.expires_at))  # completes it
    held = await store.claim_idempotency_key(claim(key="key-2"), datetime.now(UTC))
    assert held is not None and held.result == '{"s": 3}'


async def test_a_keyed_conversation_is_stored_with_its_keys_outcome_or_not_at_all(store: Store) -> None:
    first = claim()
    made = SessionRecord(new_id(), None, "conversation", utcnow())
    await store.create_session(made)
    record = ConversationRecord(f"conv_{uuid.uuid4().hex}", made.session_id, {}, 1)
    await store.create_conversation(
        record, [], settle=KeySettlement(first, '{"c": 1}', first.expires_at, claiming=True)
    )
    assert (await conversations(store.kernel).get(record.conversation_id)).session_id == made.session_id
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and held.result == '{"c": 1}'
    other = ConversationRecord(f"conv_{uuid.uuid4().hex}", made.session_id, {}, 1)
    with pytest.raises(IdempotencyKeyHeldError):
        await store.create_conversation(other, [], settle=KeySettlement(claim(), "{}", first.expires_at, claiming=True))
    assert await conversations(store.kernel).find(other.conversation_id) is None


async def test_a_keyed_vector_store_is_stored_with_its_keys_outcome_or_not_at_all(store: Store) -> None:
    first = claim()
    made = vector_store_record(f"vs_{uuid.uuid4().hex}", 4)
    await store.create_vector_store(made, [], settle=KeySettlement(first, '{"v": 1}', first.expires_at, claiming=True))
    assert await vector_stores(store.kernel).find(made.vector_store_id) is not None
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and held.result == '{"v": 1}'
    other = vector_store_record(f"vs_{uuid.uuid4().hex}", 4)
    with pytest.raises(IdempotencyKeyHeldError):
        await store.create_vector_store(other, [], settle=KeySettlement(claim(), "{}", first.expires_at, claiming=True))
    assert await vector_stores(store.kernel).find(other.vector_store_id) is None


async def test_keyed_items_are_stored_with_their_keys_outcome_or_not_at_all(store: Store) -> None:
    first = claim()
    made = SessionRecord(new_id(), None, "conversation", utcnow())
    record = ConversationRecord(f"conv_{uuid.uuid4().hex}", made.session_id, {}, 1)
    await store.create_conversation(record, [], session=made)
    one = MessageItem(id="item-1", role="user", content=[InputText(text="one")])
    await store.add_items(
        record.conversation_id, [one], KeySettlement(first, '{"i": 1}', first.expires_at, claiming=True)
    )
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and held.result == '{"i": 1}'
    two = MessageItem(id="item-2", role="user", content=[InputText(text="two")])
    with pytest.raises(IdempotencyKeyHeldError):
        await store.add_items(
            record.conversation_id, [two], KeySettlement(claim(), "{}", first.expires_at, claiming=True)
        )
    assert [item.id for item in await store.all_items(record.conversation_id)] == ["item-1"]


async def test_keyed_attachments_and_batches_are_stored_with_their_keys_outcome_or_not_at_all(store: Store) -> None:
    made = vector_store_record(f"vs_{uuid.uuid4().hex}", 4)
    await store.create_vector_store(made, [])
    first, second = claim(), claim(key="key-2")

    def attachment(file_id: str, batch_id: str | None = None) -> VectorStoreFileRecord:
        return VectorStoreFileRecord(made.vector_store_id, file_id, 1, batch_id=batch_id)

    await store.add_vector_store_files(
        made.vector_store_id, [attachment("file-a")], KeySettlement(first, '{"a": 1}', first.expires_at, claiming=True)
    )
    batch = FileBatchRecord("vsfb_1", made.vector_store_id, 1)
    settle = KeySettlement(second, '{"b": 1}', second.expires_at, claiming=True)
    await store.add_vector_store_files(made.vector_store_id, [attachment("file-b", "vsfb_1")], settle, batch)
    for key, result in (("key-1", '{"a": 1}'), ("key-2", '{"b": 1}')):
        held = await store.claim_idempotency_key(claim(key=key), datetime.now(UTC))
        assert held is not None and held.result == result
    with pytest.raises(IdempotencyKeyHeldError):
        await store.add_vector_store_files(
            made.vector_store_id, [attachment("file-c")], KeySettlement(claim(), "{}", first.expires_at, claiming=True)
        )
    with pytest.raises(IdempotencyKeyHeldError):
        await store.add_vector_store_files(
            made.vector_store_id,
            [attachment("file-d", "vsfb_2")],
            KeySettlement(claim(key="key-2"), "{}", second.expires_at, claiming=True),
            FileBatchRecord("vsfb_2", made.vector_store_id, 1),
        )
    files = await store.list_vector_store_files(made.vector_store_id, None, 10, "asc")
    assert sorted(f.file_id for f in files.items) == ["file-a", "file-b"]
    with pytest.raises(NotFoundError):  # the refused batch left nothing, its own record neither
        await file_batch(store.kernel, made.vector_store_id, "vsfb_2")


async def test_a_keyed_write_of_no_records_stores_the_key_alone(store: Store) -> None:
    """What a fork copying a paused turn writes last, once the copy is whole: the key and its outcome, or a
    refusal when an earlier call holds it."""
    first = claim()
    assert await store.write_keyed([], KeySettlement(first, '{"fork": 1}', first.expires_at, claiming=True)) == []
    held = await store.claim_idempotency_key(claim(), datetime.now(UTC))
    assert held is not None and (held.token, held.result) == (first.token, '{"fork": 1}')
    with pytest.raises(IdempotencyKeyHeldError):
        await store.write_keyed([], KeySettlement(claim(), "{}", first.expires_at, claiming=True))
