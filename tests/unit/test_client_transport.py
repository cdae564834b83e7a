"""``ferryman.client``'s transport without a server: error mapping, retries, backoff and idempotency keys."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from ferryman.client import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    Client,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    RetryPolicy,
    UnprocessableEntityError,
    _transport,
)

Handler = Callable[[httpx.Request], httpx.Response]
AGENT = {"agent_id": "agent-1"}


@pytest.fixture()
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits the client asked for (recorded, not slept)."""
    waited: list[float] = []
    monkeypatch.setattr(_transport.time, "sleep", waited.append)
    return waited


def client_of(handler: Handler, max_retries: int | RetryPolicy = 2) -> Client:
    http = httpx.Client(transport=httpx.MockTransport(handler))
    return Client(base_url="http://ferryman.test", api_key="sk-test", max_retries=max_retries, http_client=http)


def answers(*responses: httpx.Response | Exception) -> tuple[Handler, list[httpx.Request]]:
    """A handler giving ``responses`` in turn (raising the exceptions), and the requests it got."""
    queue: Iterator[httpx.Response | Exception] = iter(responses)
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = next(queue)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return handle, seen


def error(status: int, code: str, message: str, field: str | None = None, **headers: str) -> httpx.Response:
    body = {"error": {"code": code, "message": message, **({"field": field} if field else {})}, "detail": message}
    return httpx.Response(status, json=body, headers={"x-should-retry": "false", **headers})


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (403, PermissionDeniedError),
        (404, NotFoundError),
        (409, ConflictError),
        (413, PayloadTooLargeError),
        (422, UnprocessableEntityError),
        (429, RateLimitError),
        (500, InternalServerError),
        (502, InternalServerError),
        (418, APIStatusError),
    ],
)
def test_each_status_maps_to_its_error_with_the_servers_code_message_and_field(
    status: int, kind: type[APIStatusError], sleeps: list[float]
) -> None:
    handler, seen = answers(error(status, "some_code", "what went wrong", "agent_config.model"))
    with pytest.raises(kind) as caught:
        client_of(handler).agents.retrieve("agent-1")
    assert type(caught.value) is kind
    assert (caught.value.status_code, caught.value.code) == (status, "some_code")
    assert (caught.value.message, caught.value.field) == ("what went wrong", "agent_config.model")
    assert caught.value.body["error"]["code"] == "some_code"
    assert len(seen) == 1  # the server said its answer is final


def test_a_body_that_is_not_ferrymans_still_gives_a_readable_error(sleeps: list[float]) -> None:
    handler, _ = answers(httpx.Response(404, text="no such page"))
    with pytest.raises(NotFoundError, match="no such page") as caught:
        client_of(handler).agents.retrieve("agent-1")
    assert caught.value.code is None


def test_connection_errors_are_retried_with_growing_backoff_then_succeed(sleeps: list[float]) -> None:
    handler, seen = answers(httpx.ConnectError("refused"), httpx.ReadError("reset"), httpx.Response(200, json=AGENT))
    assert client_of(handler).agents.create({"model": "m", "instructions": "i"}).agent_id == "agent-1"
    assert len(seen) == 3
    assert 0.375 <= sleeps[0] <= 0.5 and 0.75 <= sleeps[1] <= 1.0  # 0.5 s, doubled, minus up to 25% jitter


def test_connection_errors_past_the_retries_raise_connection_and_timeout_errors(sleeps: list[float]) -> None:
    handler, seen = answers(*[httpx.ConnectError("refused")] * 3)
    with pytest.raises(APIConnectionError, match="refused"):
        client_of(handler).agents.retrieve("a")
    assert len(seen) == 3
    handler, _ = answers(httpx.ReadTimeout("slow"))
    with pytest.raises(APITimeoutError):
        client_of(handler, max_retries=0).agents.retrieve("a")


def test_a_policy_may_give_up_at_once_on_a_failed_connection_but_not_on_answers(sleeps: list[float]) -> None:
    told_at_once = RetryPolicy(connect_failures=False)
    for failure in (httpx.ConnectError("refused"), httpx.ConnectTimeout("unreachable")):
        handler, seen = answers(failure)
        with pytest.raises(APIConnectionError):
            client_of(handler, told_at_once).agents.retrieve("a")
        assert len(seen) == 1 and sleeps == []
    handler, seen = answers(httpx.ReadError("reset"), httpx.Response(503, json={}), httpx.Response(200, json=AGENT))
    assert client_of(handler, told_at_once).agents.create({"model": "m", "instructions": "i"}).agent_id == "agent-1"
    assert len(seen) == 3 and len(sleeps) == 2


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_retryable_statuses_are_repeated(status: int, sleeps: list[float]) -> None:
    handler, seen = answers(httpx.Response(status, json={}), httpx.Response(200, json=AGENT))
    assert client_of(handler).agents.create({"model": "m", "instructions": "i"}).agent_id == "agent-1"
    assert len(seen) == 2 and len(sleeps) == 1


def test_retry_after_is_honoured_in_seconds_and_as_a_date(sleeps: list[float]) -> None:
    handler, seen = answers(
        httpx.Response(429, json={}, headers={"Retry-After": "3"}),
        httpx.Response(503, json={}, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
        httpx.Response(200, json=AGENT),
    )
    client_of(handler).agents.create({"model": "m", "instructions": "i"})
    assert sleeps == [3.0, 0.0] and len(seen) == 3


def test_a_retry_after_longer_than_the_limit_fails_at_once(sleeps: list[float]) -> None:
    handler, seen = answers(error(429, "rate_limited", "slow down", **{"Retry-After": "3600", "x-should-retry": ""}))
    with pytest.raises(RateLimitError) as caught:
        client_of(handler).agents.retrieve("a")
    assert caught.value.retry_after == 3600.0 and len(seen) == 1 and sleeps == []


def test_client_errors_are_not_retried(sleeps: list[float]) -> None:
    handler, seen = answers(httpx.Response(400, json={"error": {"code": "invalid_request", "message": "bad"}}))
    with pytest.raises(BadRequestError):
        client_of(handler).agents.create({"model": "m", "instructions": "i"})
    assert len(seen) == 1 and sleeps == []


def test_retries_exhausted_raise_the_last_answers_error(sleeps: list[float]) -> None:
    handler, seen = answers(*[httpx.Response(503, json={"error": {"code": "unavailable", "message": "busy"}})] * 2)
    with pytest.raises(InternalServerError, match="busy"):
        client_of(handler, max_retries=1).agents.retrieve("a")
    assert len(seen) == 2


def test_every_attempt_of_a_create_sends_the_same_idempotency_key(sleeps: list[float]) -> None:
    handler, seen = answers(httpx.ReadError("lost"), httpx.Response(502, json={}), httpx.Response(200, json=AGENT))
    client = client_of(handler)
    client.agents.create({"model": "m", "instructions": "i"})
    keys = {request.headers["Idempotency-Key"] for request in seen}
    assert len(seen) == 3 and len(keys) == 1
    handler, again = answers(httpx.Response(200, json=AGENT))
    client_of(handler).agents.create({"model": "m", "instructions": "i"})
    assert again[0].headers["Idempotency-Key"] not in keys  # a new logical call, a new key


def test_reads_send_no_idempotency_key_and_every_request_is_authenticated(sleeps: list[float]) -> None:
    handler, seen = answers(httpx.Response(200, json={"data": [], "has_more": False}))
    assert list(client_of(handler).agents.list()) == []
    assert "Idempotency-Key" not in seen[0].headers
    assert seen[0].headers["Authorization"] == "Bearer sk-test"
    assert seen[0].url.path == "/v1/agents" and seen[0].url.params["start_index"] == "0"


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRYMAN_URL", "http://elsewhere:9000/")
    monkeypatch.setenv("FERRYMAN_API_KEY", "sk-env")
    client = Client()
    assert client.base_url == "http://elsewhere:9000" and client.options.api_key == "sk-env"
    client.close()
    monkeypatch.delenv("FERRYMAN_URL")
    monkeypatch.delenv("FERRYMAN_API_KEY")
    with Client() as default:
        assert default.base_url == "http://127.0.0.1:8321" and default.options.api_key is None


def test_ids_are_percent_encoded_in_paths(sleeps: list[float]) -> None:
    handler, seen = answers(httpx.Response(200, json={"identifier": "mcp::x/y", "provider_id": "p"}))
    client_of(handler).toolgroups.retrieve("mcp::x/y")
    assert seen[0].url.raw_path == b"/v1/toolgroups/mcp%3A%3Ax%2Fy"
