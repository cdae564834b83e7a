"""One error handler: our exceptions map to statuses, anything else is a 500 that leaks nothing."""

from __future__ import annotations

import logging

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from ferryman.errors import ConflictError, InvalidRequestError, NotFoundError, UpstreamError
from ferryman.server.errors import EXCEPTION_HANDLERS


def _app(exc: Exception) -> Starlette:
    async def fail(request: Request) -> Response:
        raise exc

    return Starlette(routes=[Route("/x", fail)], exception_handlers=EXCEPTION_HANDLERS)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (NotFoundError("agent 'a' not found"), 404),
        (InvalidRequestError("bad", field="messages"), 400),
        (ConflictError("busy"), 409),
        (UpstreamError("model down"), 502),
    ],
)
def test_our_errors_map_to_statuses(exc: Exception, status: int) -> None:
    response = TestClient(_app(exc)).get("/x")
    assert response.status_code == status
    assert response.json()["error"]["message"] == str(exc)


def test_unexpected_errors_are_logged_500s_without_their_message(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        response = TestClient(_app(RuntimeError("secret detail")), raise_server_exceptions=False).get("/x")
    assert response.status_code == 500
    assert "secret detail" not in response.text
    assert any("unhandled error" in record.message for record in caplog.records)


def test_unknown_routes_are_json_404s() -> None:
    response = TestClient(_app(RuntimeError())).get("/nowhere")
    assert response.status_code == 404 and response.json()["error"]["code"] == "http_error"
