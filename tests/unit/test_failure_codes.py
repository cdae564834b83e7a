"""One table from failure code to exception to HTTP status, read the same way by every caller."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from ferryman.errors import FAILURES, FailureCode, error_for_code
from ferryman.server.errors import EXCEPTION_HANDLERS, STATUS_OF


def _answer_for(code: str) -> Response:
    async def fail(request: Request) -> Response:
        raise error_for_code(code, "turn t failed: why")

    app = Starlette(routes=[Route("/x", fail)], exception_handlers=EXCEPTION_HANDLERS)  # type: ignore[arg-type]
    return TestClient(app).get("/x")


def test_every_failure_code_has_one_exception_class_that_carries_it() -> None:
    assert set(FAILURES) == set(FailureCode)
    for code, (cls, _) in FAILURES.items():
        assert cls.code == code
    assert STATUS_OF == {cls: status for cls, status in FAILURES.values()}


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("cancelled", 409),
        ("interrupted", 503),
        ("internal_error", 500),
        ("conversation_locked", 409),
        ("upstream_error", 502),
        ("not_found", 404),
        ("invalid_request", 400),
        ("provider_key_rejected", 400),
        ("payload_too_large", 413),
    ],
)
def test_a_stored_failure_comes_back_with_its_own_code_and_status(code: str, status: int) -> None:
    response = _answer_for(code)
    assert (response.status_code, response.json()["error"]["code"]) == (status, code)
    assert response.json()["error"]["message"] == "turn t failed: why"


def test_an_unknown_stored_code_is_a_generic_turn_failure() -> None:
    response = _answer_for("something_newer")
    assert (response.status_code, response.json()["error"]["code"]) == (500, "turn_failed")
