"""A write that claims its request's idempotency key itself (``KeySettlement.claiming``), on every backend.

The key and the record go in together, in one transaction or script; a key an earlier call holds makes the
write store nothing and name the holder (``IdempotencyKeyHeldError``), before anything else it checks.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from storage_backends import BACKENDS
from store_records import response_start

from ferryman.errors import ConflictError, IdempotencyKeyInUseError, NotFoundError
from ferryman.ids import new_id, utcnow
from ferryman.storage.base import (
    IdempotencyKeyHeldError,
    IdempotencyRecord,
    KeySettlement,
    SessionRecord,
    Store,
    TurnRecord,
)

pytestmark = pytest.mark.anyio

DAY = timedelta(hours=24)


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield opened


def _record(fingerprint: str = "fp-1", lifetime: timedelta = DAY) -> IdempotencyRecord:
    now = datetime.now(UTC)
    return IdempotencyRecord("alice", "key-1", uuid.uuid4().hex, fingerprint, now, now + lifetime)


def _claiming(result: str = '{"turn": 1}', fingerprint: str = "fp-1") -> KeySettlement:
    record = _record(fingerprint)
    return KeySettlement(record, result, record.expires_at, claiming=True)


def _turn(session_id: str) -> TurnRecord:
    return TurnRecord(new_id(), session_id, None, "in_progress", [], utcnow())


async def _session(store: Store) -> str:
    session = SessionRecord(new_id(), None, "s", utcnow())
    await store.create_session(session)
    return session.session_id


async def _holder(store: Store) -> IdempotencyRecord | None:
    """The record that holds the key now (None: it is free), read by a claim of another request."""
    probe = _record(fingerprint="probe")
    held = await store.claim_idempotency_key(probe, probe.created_at)
    if held is None:
        await store.release_idempotency_key(probe)
    return held


async def _missing(store: Store, turn: TurnRecord) -> bool:
    try:
        await store.get_turn_record(turn.session_id, turn.turn_id)
    except NotFoundError:
        return True
    return False


async def test_a_start_claims_a_free_key_with_its_outcome(store: Store) -> None:
    turn, settle = _turn(await _session(store)), _claiming()

    await store.start_turn(turn, [], settle=settle)

    held = await _holder(store)
    assert held is not None
    assert (held.token, held.fingerprint, held.result) == (settle.claim.token, "fp-1", '{"turn": 1}')
    assert (await store.get_turn_record(turn.session_id, turn.turn_id)).status == "in_progress"


@pytest.mark.parametrize("outcome", [None, '{"turn": 0}'], ids=["pending", "settled"])
async def test_a_start_finding_its_key_held_stores_nothing_and_names_the_holder(
    store: Store, outcome: str | None
) -> None:
    first = _record(fingerprint="fp-0")
    await store.claim_idempotency_key(first, first.created_at)
    if outcome is not None:
        assert await store.complete_idempotency_key(first, outcome, first.expires_at)
    turn = _turn(await _session(store))

    with pytest.raises(IdempotencyKeyHeldError) as held:
        await store.start_turn(turn, [], settle=_claiming())

    assert (held.value.fingerprint, held.value.result, held.value.token) == ("fp-0", outcome, first.token)
    assert await _missing(store, turn)
    await store.start_turn(_turn(turn.session_id), [])  # the session was left free


async def test_a_held_key_is_answered_before_the_session_is_found_busy(store: Store) -> None:
    session_id = await _session(store)
    await store.start_turn(_turn(session_id), [], settle=_claiming())  # the first call's turn, still running

    with pytest.raises(IdempotencyKeyHeldError) as held:
        await store.start_turn(_turn(session_id), [], settle=_claiming())

    assert held.value.result == '{"turn": 1}'


async def test_a_start_takes_over_an_expired_key(store: Store) -> None:
    lapsed = _record(fingerprint="fp-0", lifetime=timedelta(milliseconds=1))
    await store.claim_idempotency_key(lapsed, lapsed.created_at)
    await asyncio.sleep(0.01)  # past its expiry, in every backend's clock
    turn, settle = _turn(await _session(store)), _claiming()

    await store.start_turn(turn, [], settle=settle)

    held = await _holder(store)
    assert held is not None and (held.token, held.result) == (settle.claim.token, '{"turn": 1}')


async def test_a_start_refused_for_its_session_leaves_the_key_free(store: Store) -> None:
    session_id = await _session(store)
    await store.start_turn(_turn(session_id), [])

    with pytest.raises(ConflictError):
        await store.start_turn(_turn(session_id), [], settle=_claiming())
    with pytest.raises(NotFoundError):
        await store.start_turn(_turn("no-such-session"), [], settle=_claiming())

    assert await _holder(store) is None


async def test_starts_racing_for_one_key_store_exactly_one_turn(store: Store) -> None:
    turns = [_turn(await _session(store)) for _ in range(4)]

    results = await asyncio.gather(
        *(store.start_turn(turn, [], settle=_claiming(f'{{"turn": {n}}}')) for n, turn in enumerate(turns)),
        return_exceptions=True,
    )

    started = [turn for turn, result in zip(turns, results, strict=True) if not isinstance(result, BaseException)]
    assert len(started) == 1, results
    assert all(isinstance(r, IdempotencyKeyHeldError) for r in results if isinstance(r, BaseException)), results
    assert [await _missing(store, turn) for turn in turns].count(False) == 1


async def test_a_response_start_claims_its_key_or_stores_nothing(store: Store) -> None:
    first, repeat = response_start("first"), response_start("repeat")

    await store.start_response(first, _claiming('{"response": 1}'))
    with pytest.raises(IdempotencyKeyHeldError) as held:
        await store.start_response(repeat, _claiming('{"response": 2}'))

    assert held.value.result == '{"response": 1}'
    assert (await store.get_response(first.record.response.id)).turn_id == first.turn.turn_id
    with pytest.raises(NotFoundError):
        await store.get_response(repeat.record.response.id)
    assert await _missing(store, repeat.turn)
    with pytest.raises(NotFoundError):  # nor its session
        await store.start_turn(_turn(repeat.record.session_id), [])


async def test_a_response_start_whose_claim_lapsed_stores_nothing(store: Store) -> None:
    lapsed, taker = _record(), _record(fingerprint="fp-2")  # the first claim ran out, and another call took the key
    assert await store.claim_idempotency_key(taker, taker.created_at) is None
    start = response_start("q")

    with pytest.raises(IdempotencyKeyInUseError):
        await store.start_response(start, KeySettlement(lapsed, '{"response": 1}', lapsed.created_at + DAY))

    with pytest.raises(NotFoundError):
        await store.get_response(start.record.response.id)
    assert await _missing(store, start.turn)
    held = await _holder(store)
    assert held is not None and (held.token, held.result) == (taker.token, None)
