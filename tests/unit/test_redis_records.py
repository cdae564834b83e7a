"""The Redis backend's pure parts: key naming, stored entry formats, record encoding."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ferryman.api.agents import TurnError
from ferryman.api.content import CompletionMessage, UserMessage
from ferryman.api.responses import Response
from ferryman.ids import new_id, utcnow
from ferryman.storage import codec
from ferryman.storage.base import ResponseRecord, StoredEvent, TurnRecord
from ferryman.storage.redis import store_keys as redis_keys
from ferryman.storage.redis.records import finish_args, lease_score, response_columns, response_of, turn_of
from ferryman.storage.redis.store_keys import Keys, event_member, message_row, stored_event
from ferryman.storage.select import store_for


def test_keys_end_with_the_id_so_no_id_makes_two_keys_collide() -> None:
    keys = Keys("p:")
    assert keys.of(redis_keys.SESSION, "x") == "p:session:x"
    assert keys.of(redis_keys.SESSION, "x:turns") != keys.of(redis_keys.SESSION_TURNS, "x")
    assert keys.base(redis_keys.RESPONSE) + "r1" == keys.of(redis_keys.RESPONSE, "r1")
    assert keys.global_(redis_keys.LEASES) == "p:leases"


def test_stored_entries_split_at_their_first_separator_only() -> None:
    assert message_row('12 {"content": "a b"}') == (12, '{"content": "a b"}')
    assert stored_event('3:{"a": "b:c"}') == StoredEvent(3, '{"a": "b:c"}')
    assert stored_event(event_member(12, '{"k": 1}')) == StoredEvent(12, '{"k": 1}')


def test_a_turn_without_a_lease_scores_as_long_expired() -> None:
    assert lease_score(None) == float("-inf")
    moment = utcnow() + timedelta(seconds=30)
    assert lease_score(moment) == moment.timestamp()


def _stored_turn(record: TurnRecord) -> dict[str, str]:
    """The hash the start and finish scripts leave for ``record``."""
    finish = finish_args(record, None)
    fields = {
        "session_id": record.session_id,
        "status": finish.status,
        "inputs": codec.dump_inputs(record.input_messages),
        "overrides": "{}",
        "started_at": codec.dump_time(record.started_at),
        "infer_iters": str(finish.infer_iters),
        "output": finish.output,
        "error_code": finish.error_code,
        "error_message": finish.error_message,
        "completed_at": finish.completed_at,
        "seq": "7",
    }
    return {name: value for name, value in fields.items() if value is not None}


@pytest.mark.parametrize("failed", [False, True])
def test_a_finished_turn_reads_back_from_its_hash(failed: bool) -> None:
    record = TurnRecord(new_id(), new_id(), None, "completed", [UserMessage(content="q")], utcnow())
    record.infer_iters, record.completed_at = 2, utcnow()
    if failed:
        record.status, record.error = "failed", TurnError(code="upstream_error", message="")
    else:
        record.output_message = CompletionMessage(content="a", stop_reason="end_of_turn")
    assert turn_of(record.turn_id, _stored_turn(record)) == record


def test_an_interrupted_response_reads_back_failed_with_its_reason() -> None:
    response = Response(id="resp_1", created_at=1, status="in_progress", model="m")
    record = ResponseRecord(response, new_id(), new_id())
    args = response_columns(record)
    stored = [args.turn_id, args.session_id, "", "", "1" if args.background else "0", args.body]
    assert response_of([*stored, None]) == record
    failed = response_of([*stored, "the replica stopped"]).response
    assert failed.status == "failed"
    assert failed.error is not None and (failed.error.code, failed.error.message) == (
        "interrupted",
        "the replica stopped",
    )


def test_redis_urls_select_the_redis_store() -> None:
    from ferryman.storage.redis.store import RedisStore

    assert isinstance(store_for("redis://127.0.0.1:6379/0"), RedisStore)
    assert isinstance(store_for("rediss://cache.example:6380"), RedisStore)
