"""Sending requests: one retry core shared by the sync and the async client.

The core (:func:`_attempts`) is a generator that knows nothing of I/O: it yields the request to
send or the seconds to wait, is sent back the answer (or the connection error), and returns the
successful answer or raises the mapped error. :class:`SyncTransport` and :class:`AsyncTransport`
only drive it, the one blocking, the other awaiting.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import time
import uuid
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from .errors import APIConnectionError, APITimeoutError, status_error

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8321"
URL_ENV = "FERRYMAN_URL"
API_KEY_ENV = "FERRYMAN_API_KEY"
IDEMPOTENCY_HEADER = "Idempotency-Key"
USER_AGENT = "ferryman-client/0.1"

# Statuses worth repeating: the server (or a proxy) may answer otherwise a moment later.
_RETRYABLE_STATUSES = frozenset({408, 429})


@dataclass(frozen=True)
class RetryPolicy:
    """How failed requests are repeated.

    Attributes:
        max_retries: Repeats after the first attempt (0: never repeat).
        initial_delay: The wait before the first repeat, doubled for each next one (with jitter).
        max_delay: The longest backoff wait.
        max_retry_after: The longest ``Retry-After`` honoured; a longer one fails at once.
        connect_failures: Whether a request that could not connect (refused, unreachable, the connect
            timeout) is repeated; a command line tells a server that is down at once instead.
    """

    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    connect_failures: bool = True

    def backoff(self, attempt: int) -> float:
        """The wait before repeat number ``attempt + 1``: exponential, with up to 25% jitter off."""
        delay = min(self.initial_delay * 2.0**attempt, self.max_delay)
        jitter: float = random.random()  # noqa: S311  (jitter, not secrecy)
        return delay * (1 - 0.25 * jitter)


@dataclass(frozen=True)
class ClientOptions:
    """Where and how a client talks to ferryman."""

    base_url: str
    api_key: str | None = field(repr=False)  # a secret: never in a repr, a log line or a traceback
    timeout: float | httpx.Timeout = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # may carry credentials too

    @classmethod
    def resolve(
        cls,
        base_url: str | None,
        api_key: str | None,
        timeout: float | httpx.Timeout,
        max_retries: int | RetryPolicy,
        headers: Mapping[str, str] | None,
    ) -> ClientOptions:
        """The options of a client: arguments first, then ``FERRYMAN_URL`` / ``FERRYMAN_API_KEY``, then defaults."""
        url = base_url or os.environ.get(URL_ENV) or DEFAULT_URL
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        retry = max_retries if isinstance(max_retries, RetryPolicy) else RetryPolicy(max_retries=max_retries)
        return cls(url.rstrip("/"), key, timeout, retry, dict(headers or {}))

    def request_headers(self) -> dict[str, str]:
        """The headers of every request."""
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json", **self.headers}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers


@dataclass(frozen=True)
class RequestPlan:
    """One logical call: what to send, however many times it is sent.

    Attributes:
        method: The HTTP method.
        path: The path under the server's root (``/v1/agents``).
        params: Query parameters (``None`` values are left out).
        json: The JSON body.
        files: Multipart files (bytes only, so a repeat sends them again).
        data: Multipart form fields.
        headers: Extra headers.
        idempotent: Send an ``Idempotency-Key``, the same on every repeat (creates and runs).
        stream: The answer is a stream: it is returned open.
    """

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    json: Any = None
    files: Mapping[str, Any] | None = None
    data: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    idempotent: bool = False
    stream: bool = False

    def keyed(self, key: str | None = None) -> RequestPlan:
        """The plan with its ``Idempotency-Key`` fixed (a new one unless given), so every repeat sends the same."""
        if not self.idempotent or IDEMPOTENCY_HEADER in self.headers:
            return self
        return replace(self, headers={**self.headers, IDEMPOTENCY_HEADER: key or new_idempotency_key()})


@dataclass(frozen=True)
class Call(Generic[T]):
    """A plan and the parser of its answer: what a resource method does, whichever client runs it."""

    plan: RequestPlan
    parse: Callable[[httpx.Response], T]


def new_idempotency_key() -> str:
    """A fresh key for one logical call."""
    return f"ferryman-client-{uuid.uuid4()}"


def path(template: str, *ids: str) -> str:
    """``template`` with each ``{}`` replaced by an id, percent-encoded (ids may hold ``/`` or ``:``)."""
    return template.format(*(quote(str(part), safe="") for part in ids))


def build_request(http: httpx.Client | httpx.AsyncClient, options: ClientOptions, plan: RequestPlan) -> httpx.Request:
    """The ``httpx`` request of a plan."""
    params = {name: value for name, value in (plan.params or {}).items() if value is not None}
    return http.build_request(
        plan.method,
        options.base_url + plan.path,
        params=params or None,
        json=plan.json,
        files=plan.files,
        data=plan.data,
        headers={**options.request_headers(), **plan.headers},
    )


Outcome = httpx.Response | httpx.TransportError | None
Step = httpx.Request | float


def _attempts(
    plan: RequestPlan, options: ClientOptions, build: Callable[[RequestPlan], httpx.Request]
) -> Generator[Step, Outcome, httpx.Response]:
    """The retry core: yields a request to send or seconds to wait; returns the successful answer.

    An error answer comes back with its body read. It raises the mapped error when the answer
    is final: a status not worth repeating, ``x-should-retry: false``, or the last attempt.
    """
    policy = options.retry
    attempt = 0
    while True:
        outcome = yield build(plan)
        if isinstance(outcome, httpx.TransportError):
            if attempt >= policy.max_retries or (not policy.connect_failures and _not_connected(outcome)):
                raise _connection_error(outcome) from outcome
            yield policy.backoff(attempt)
        else:
            assert outcome is not None
            if outcome.is_success:
                return outcome
            delay = _retry_delay(outcome, attempt, policy)
            if delay is None:
                raise status_error(outcome.status_code, outcome.content, retry_after(outcome.headers))
            yield delay
        attempt += 1


def _not_connected(error: httpx.TransportError) -> bool:
    """Whether ``error`` came before any byte was sent: the connection was refused, unreachable or too slow."""
    return isinstance(error, httpx.ConnectError | httpx.ConnectTimeout)


def _retry_delay(response: httpx.Response, attempt: int, policy: RetryPolicy) -> float | None:
    """How long to wait before repeating an error answer; ``None`` when it is final."""
    if attempt >= policy.max_retries:
        return None
    # The server's own word wins: ferryman marks its typed errors final (repeating a failed turn re-runs it).
    should = response.headers.get("x-should-retry", "").lower()
    if should == "false":
        return None
    if should != "true" and response.status_code not in _RETRYABLE_STATUSES and response.status_code < 500:
        return None
    after = retry_after(response.headers)
    if after is None:
        return policy.backoff(attempt)
    return after if after <= policy.max_retry_after else None


def retry_after(headers: httpx.Headers) -> float | None:
    """The ``Retry-After`` of an answer in seconds (it may be seconds or an HTTP date), if it has one."""
    raw = headers.get("retry-after", "").strip()
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _connection_error(exc: httpx.TransportError) -> APIConnectionError:
    kind = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
    return kind(f"{type(exc).__name__}: {exc or 'connection failed'}")


class SyncTransport:
    """Sends plans with a blocking ``httpx.Client``, repeating them as the retry core says.

    Args:
        options: Where and how.
        http_client: The ``httpx.Client`` to send with; one of its own (closed by :meth:`close`) if ``None``.
    """

    def __init__(self, options: ClientOptions, http_client: httpx.Client | None = None) -> None:
        self.options = options
        self._owned = http_client is None
        self._http = http_client or httpx.Client(timeout=options.timeout)

    def send(self, plan: RequestPlan) -> httpx.Response:
        """The successful answer to ``plan``: read, or open if the plan streams (close it)."""
        steps = _attempts(plan.keyed(), self.options, lambda p: build_request(self._http, self.options, p))
        outcome: Outcome = None
        while True:
            try:
                step = steps.send(outcome)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            if isinstance(step, float):
                time.sleep(step)
                outcome = None
            else:
                outcome = self._exchange(step, plan.stream)

    def call(self, call: Call[T]) -> T:
        """The answer to a call, parsed."""
        return call.parse(self.send(call.plan))

    def _exchange(self, request: httpx.Request, stream: bool) -> httpx.Response | httpx.TransportError:
        try:
            response = self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            return exc
        if stream and response.is_success:
            return response
        try:
            response.read()
        except httpx.TransportError as exc:
            return exc
        finally:
            response.close()
        return response

    def close(self) -> None:
        """Close the HTTP client, if it is this transport's own."""
        if self._owned:
            self._http.close()


class AsyncTransport:
    """Sends plans with an ``httpx.AsyncClient``, repeating them as the retry core says.

    Args:
        options: Where and how.
        http_client: The ``httpx.AsyncClient`` to send with; one of its own (closed by :meth:`aclose`) if ``None``.
    """

    def __init__(self, options: ClientOptions, http_client: httpx.AsyncClient | None = None) -> None:
        self.options = options
        self._owned = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=options.timeout)

    async def send(self, plan: RequestPlan) -> httpx.Response:
        """The successful answer to ``plan``: read, or open if the plan streams (close it)."""
        steps = _attempts(plan.keyed(), self.options, lambda p: build_request(self._http, self.options, p))
        outcome: Outcome = None
        while True:
            try:
                step = steps.send(outcome)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            if isinstance(step, float):
                await asyncio.sleep(step)
                outcome = None
            else:
                outcome = await self._exchange(step, plan.stream)

    async def call(self, call: Call[T]) -> T:
        """The answer to a call, parsed."""
        return call.parse(await self.send(call.plan))

    async def _exchange(self, request: httpx.Request, stream: bool) -> httpx.Response | httpx.TransportError:
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            return exc
        if stream and response.is_success:
            return response
        try:
            await response.aread()
        except httpx.TransportError as exc:
            return exc
        finally:
            await response.aclose()
        return response

    async def aclose(self) -> None:
        """Close the HTTP client, if it is this transport's own."""
        if self._owned:
            await self._http.aclose()
