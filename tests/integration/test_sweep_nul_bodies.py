"""The lease sweep fails every expired turn and its response, whatever the response's stored body holds.

NUL is legitimate inside text (instructions, metadata values, model output), and
PostgreSQL's jsonb refuses ``\\u0000``: a sweep that merged the failure through
jsonb raised on such a body at every beat, and no expired turn of its batch was
ever failed. A body that is not JSON at all must not stop the others either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from storage_backends import BACKENDS
from store_records import response_start

from ferryman.api.responses import MessageItem, OutputText, Response, ResponseError
from ferryman.ids import new_id, utcnow
from ferryman.storage.base import ExpiredTurn, ResponseRecord, Store
from ferryman.storage.sql.seam import count
from ferryman.storage.sql.store import SqlStore

pytestmark = pytest.mark.anyio

NUL_TEXT = "before\x00after"
STOPPED = "the replica running it stopped"


@pytest.fixture(params=list(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    async with BACKENDS[request.param](tmp_path) as opened:
        yield opened


async def expired_response(store: Store, text: str) -> ResponseRecord:
    """A running response, holding ``text`` in its instructions, metadata and output, whose lease ended."""
    start = response_start(text, items=[])
    start.turn.lease_until = utcnow() - timedelta(seconds=1)
    output = MessageItem(id=new_id("msg"), role="assistant", content=[OutputText(text=text)], status="completed")
    body = {"instructions": text, "metadata": {"note": text}, "output": [output]}
    record = replace(start.record, response=start.record.response.model_copy(update=body))
    await store.start_response(replace(start, record=record))
    return record


def interrupted(record: ResponseRecord) -> Response:
    """The response as the sweep leaves it: everything kept, failed as interrupted."""
    return record.response.model_copy(
        update={"status": "failed", "error": ResponseError(code="interrupted", message=STOPPED)}
    )


async def assert_failed(store: Store, record: ResponseRecord) -> None:
    turn = await store.get_turn_record(record.session_id, record.turn_id)
    assert (turn.status, turn.error and turn.error.code) == ("failed", "interrupted")


async def test_the_sweep_fails_a_response_whose_body_holds_nul_and_the_rest_of_its_batch(store: Store) -> None:
    with_nul = await expired_response(store, NUL_TEXT)
    plain = await expired_response(store, "plain")
    failed = await store.fail_expired_turns(utcnow(), STOPPED)
    assert sorted(failed, key=lambda e: e.turn_id) == sorted(
        [ExpiredTurn(with_nul.turn_id, with_nul.response.id), ExpiredTurn(plain.turn_id, plain.response.id)],
        key=lambda e: e.turn_id,
    )
    for record in (with_nul, plain):
        assert (await store.get_response(record.response.id)).response == interrupted(record)
        await assert_failed(store, record)
    assert await store.fail_expired_turns(utcnow(), STOPPED) == []


@pytest.mark.parametrize("store", [name for name in BACKENDS if name != "redis"], indirect=True)
async def test_a_response_body_that_is_not_json_does_not_stop_the_sweep(store: Store) -> None:
    assert isinstance(store, SqlStore)
    damaged = await expired_response(store, "damaged")
    plain = await expired_response(store, "plain")
    await store._db.write(
        count("UPDATE responses SET body = 'not json' WHERE response_id = :id", id=damaged.response.id)
    )
    assert {expired.turn_id for expired in await store.fail_expired_turns(utcnow(), STOPPED)} == {
        damaged.turn_id,
        plain.turn_id,
    }
    assert (await store.get_response(plain.response.id)).response == interrupted(plain)
    await assert_failed(store, damaged)
    await assert_failed(store, plain)
