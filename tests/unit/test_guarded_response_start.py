"""A response's start under owners and the access policy (``RecordGuard.starting``): one write creates its
session, turn and response, each checked, owned by the caller and audited as a create of its own would be."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from audit_capture import audit_of
from ferryman.api.content import UserMessage
from ferryman.api.responses import Response
from ferryman.auth.filters import owner_of
from ferryman.auth.policy import ACTIONS, AccessPolicy, parse_policy
from ferryman.auth.principal import Principal, PrincipalKind
from ferryman.errors import ForbiddenError, NotFoundError
from ferryman.ids import new_id, utcnow
from ferryman.services.access import Access
from ferryman.services.record_guard import RecordGuard, owners_of
from ferryman.storage.base import ResponseRecord, ResponseStart, SessionRecord, Store, TurnRecord
from ferryman.storage.sql.sqlite import SqliteStore
from inprocess import migrated_sqlite

pytestmark = pytest.mark.anyio

ALICE = Principal(PrincipalKind.SUBJECT, "alice")
BOB = Principal(PrincipalKind.SUBJECT, "bob")


@pytest.fixture()
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    backend = SqliteStore(migrated_sqlite(tmp_path / "owned.db"))
    await backend.open()
    try:
        yield backend
    finally:
        await backend.close()


def _start(session_id: str | None = None) -> ResponseStart:
    """A response in a new session (or in ``session_id``, which exists)."""
    session = SessionRecord(new_id(), None, "response", utcnow()) if session_id is None else None
    joined = session.session_id if session is not None else session_id
    assert joined is not None
    turn = TurnRecord(new_id(), joined, None, "in_progress", [UserMessage(content="hi")], utcnow())
    response = Response(id=f"resp_{uuid.uuid4().hex}", created_at=int(time.time()), status="in_progress", model="m")
    return ResponseStart(ResponseRecord(response, turn.turn_id, joined), turn, [UserMessage(content="hi")], (), session)


def _records(start: ResponseStart) -> list[tuple[str, str]]:
    return [("session", start.record.session_id), ("turn", start.turn.turn_id), ("response", start.record.response.id)]


async def _started(store: Store, who: Principal, start: ResponseStart, policy: AccessPolicy | None = None) -> None:
    """Start the response as the service does: the guard's step, the one write, then the creates audited."""
    guard = RecordGuard(store, Access(policy or AccessPolicy()))
    owner, made = await guard.starting(who, start)
    await store.start_response(start, owner=owner)
    guard.created(who, *made)


async def test_the_start_owns_and_audits_its_session_turn_and_response(
    store: Store, caught: pytest.LogCaptureFixture
) -> None:
    start = _start()

    await _started(store, ALICE, start)

    found = [(await owners_of(store, kind, [key])).get(key) for kind, key in _records(start)]
    assert found == [owner_of(ALICE)] * 3
    assert audit_of(caught) == [("create", "sub:alice", "create", f"{kind}::{key}") for kind, key in _records(start)]


async def test_a_start_the_policy_forbids_in_part_stores_nothing(
    store: Store, caught: pytest.LogCaptureFixture
) -> None:
    no_turns = parse_policy(
        [
            {"forbid": {"actions": ["create"], "resource": "turn::*"}},
            {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
        ]
    )
    start = _start()

    with pytest.raises(ForbiddenError, match="not allowed to create turn"):
        await _started(store, ALICE, start, no_turns)

    assert [await owners_of(store, kind, [key]) for kind, key in _records(start)] == [{}, {}, {}]
    with pytest.raises(NotFoundError):
        await store.get_response(start.record.response.id)
    assert audit_of(caught) == [("denied", "sub:alice", "create", f"turn::{start.turn.turn_id}")]


async def test_a_new_session_is_judged_as_the_callers_and_an_existing_one_as_stored(store: Store) -> None:
    no_updates = parse_policy(
        [
            {"forbid": {"actions": ["update"], "resource": "session::*"}},
            {"permit": {"actions": list(ACTIONS)}, "when": "user is owner"},
        ]
    )
    with pytest.raises(ForbiddenError, match="not allowed to update session"):
        await _started(store, ALICE, _start(), no_updates)
    session = SessionRecord(new_id(), None, "conversation", utcnow())
    await store.create_session(session, owner_of(BOB))
    with pytest.raises(NotFoundError):
        await _started(store, ALICE, _start(session.session_id))
    await _started(store, BOB, _start(session.session_id))
