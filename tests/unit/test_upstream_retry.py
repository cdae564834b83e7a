"""When a failed model call is sent again, and what its failure says (``inference/upstream.py``)."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest

from ferryman.inference.upstream import retry_delay, status_problem


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503])
def test_busy_and_failing_servers_are_retried_with_a_growing_backoff(status: int) -> None:
    waits = [retry_delay(attempt, status, {}) for attempt in range(6)]
    assert all(wait is not None for wait in waits)
    assert 0.375 <= waits[0] <= 0.5 and 6.0 <= waits[5] <= 8.0  # type: ignore[operator]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_client_errors_are_not_retried(status: int) -> None:
    assert retry_delay(0, status, {}) is None


def test_the_server_decides_first_and_its_wait_is_kept_up_to_a_minute() -> None:
    assert retry_delay(0, 503, {"x-should-retry": "false"}) is None
    assert retry_delay(0, 400, {"x-should-retry": "true"}) is not None
    assert retry_delay(0, 429, {"retry-after-ms": "250"}) == 0.25
    assert retry_delay(0, 429, {"retry-after": "3"}) == 3.0
    dated = retry_delay(0, 429, {"retry-after": formatdate(time.time() + 30, usegmt=True)})
    assert dated is not None and 25 < dated <= 30
    assert retry_delay(0, 429, {"retry-after": "3600"}) <= 0.5  # type: ignore[operator]
    assert retry_delay(0, 429, {"retry-after": "soon"}) <= 0.5  # type: ignore[operator]


def test_no_answer_at_all_is_retried() -> None:
    assert retry_delay(1) is not None


def test_a_refusal_reads_like_the_sdks_and_carries_its_codes() -> None:
    body = b'{"error": {"message": "too long", "code": "context_length_exceeded", "type": "invalid_request_error"}}'
    problem = status_problem(400, body)
    assert problem.status == 400
    assert problem.codes == ("context_length_exceeded", "invalid_request_error")
    assert problem.message.startswith("Error code: 400 - {'error': {'message': 'too long'")
    plain = status_problem(502, b"bad gateway\n")
    assert (plain.message, plain.codes) == ("Error code: 502 - bad gateway", ())
