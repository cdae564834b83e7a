"""Server-sent event streams that survive a dropped connection.

Every event ferryman streams is numbered (its SSE ``id``). A stream that ends before its final
event (the connection broke, a proxy timed out) is opened again where it stopped: a turn's through
its events route with ``Last-Event-ID``, a response's through ``GET /v1/responses/{id}?stream=true&
starting_after=N``. Before the first event names the run, the first request is sent again with the
same ``Idempotency-Key``, which the server answers by replaying the run's stream instead of starting
another. Events at or below the last number seen are dropped, so none is lost or repeated.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import httpx
from httpx_sse import EventSource, ServerSentEvent
from pydantic import TypeAdapter, ValidationError

from ferryman.api.agents import TurnStreamChunk, TurnStreamError
from ferryman.api.response_events import ResponseStreamEvent

from ._transport import AsyncTransport, RequestPlan, RetryPolicy, SyncTransport, path
from .errors import APIConnectionError

D = TypeVar("D")
D_co = TypeVar("D_co", covariant=True)


@dataclass(frozen=True)
class ServerEvent(Generic[D]):
    """One event as the server sent it.

    Attributes:
        id: Its number in the run's stream (``None`` if the server gave none).
        event: Its SSE event name (``message`` when unnamed; a Responses event's ``type``).
        data: Its decoded ``data``: the ``ferryman.api`` model, or the JSON as a dict when no model fits.
    """

    id: int | None
    event: str
    data: D


TurnData = TurnStreamChunk | TurnStreamError | dict[str, Any]
ResponseData = ResponseStreamEvent | dict[str, Any]


class StreamKind(Protocol[D_co]):
    """What differs between streams: how events decode, which ends the run, and where to read on.

    Attributes:
        paused: The run paused at the last event seen: the server closing the stream there ends it.
    """

    paused: bool

    def decode(self, data: str) -> D_co:
        """The decoded ``data`` of one event."""
        ...

    def observe(self, data: Any) -> bool:
        """Learn from an event (the run's id); whether it is the run's last."""
        ...

    def follow(self, last_id: int) -> RequestPlan | None:
        """The request reading on after event ``last_id``; ``None`` until the run is known."""
        ...


def _decoded(adapter: TypeAdapter[Any], data: str) -> Any:
    try:
        return adapter.validate_json(data)
    except ValidationError:  # an event this client does not know yet: keep its JSON
        return json.loads(data)


_TURN_DATA: TypeAdapter[TurnStreamChunk | TurnStreamError] = TypeAdapter(TurnStreamChunk | TurnStreamError)
_RESPONSE_DATA: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)
_TURN_ENDS = frozenset({"turn_complete", "turn_awaiting_input"})
_RESPONSE_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed", "response.cancelled"})


class TurnStreamKind:
    """A turn's stream (create, resume, or its events route).

    Args:
        agent_id: The agent.
        session_id: The session.
        turn_id: The turn, when already known (resume, events); else learnt from ``turn_start``.
        through_pauses: Read on past ``turn_awaiting_input`` (a replay of a turn that was paused and
            resumed); the stream then ends where the server ends it.
    """

    def __init__(
        self, agent_id: str, session_id: str, turn_id: str | None = None, *, through_pauses: bool = False
    ) -> None:
        self.agent_id, self.session_id, self.turn_id = agent_id, session_id, turn_id
        self.through_pauses = through_pauses
        self.paused = False

    def decode(self, data: str) -> TurnData:
        """A ``TurnStreamChunk``, a ``TurnStreamError``, or the JSON of an unknown event."""
        return _decoded(_TURN_DATA, data)  # type: ignore[no-any-return]

    def observe(self, data: Any) -> bool:
        """The turn's id from ``turn_start``; its end at ``turn_complete``, ``turn_awaiting_input`` or an error."""
        self.paused = False
        if isinstance(data, TurnStreamError):
            return True
        if isinstance(data, TurnStreamChunk):
            payload = data.event.payload
            if payload.event_type == "turn_start":
                self.turn_id = payload.turn_id
            if self.through_pauses and payload.event_type == "turn_awaiting_input":
                self.paused = True
                return False
            return payload.event_type in _TURN_ENDS
        return isinstance(data, dict) and "error" in data

    def follow(self, last_id: int) -> RequestPlan | None:
        """The turn's events route after ``last_id``."""
        if self.turn_id is None:
            return None
        route = path("/v1/agents/{}/session/{}/turn/{}/events", self.agent_id, self.session_id, self.turn_id)
        return RequestPlan("GET", route, headers={"Last-Event-ID": str(last_id)}, stream=True)


class ResponseStreamKind:
    """A response's stream (create, or retrieve with ``stream=true``).

    Args:
        response_id: The response, when already known; else learnt from ``response.created``.
    """

    def __init__(self, response_id: str | None = None) -> None:
        self.response_id = response_id
        self.paused = False  # a response never pauses: it ends, and the next one answers it

    def decode(self, data: str) -> ResponseData:
        """A ``ferryman.api.response_events`` model, or the JSON of an unknown event."""
        return _decoded(_RESPONSE_DATA, data)  # type: ignore[no-any-return]

    def observe(self, data: Any) -> bool:
        """The response's id from ``response.created``; its end at completed, incomplete, failed or cancelled."""
        kind = data.get("type") if isinstance(data, dict) else getattr(data, "type", None)
        response = getattr(data, "response", None)
        if kind == "response.created" and response is not None:
            self.response_id = response.id
        return kind in _RESPONSE_ENDS or kind == "error"

    def follow(self, last_id: int) -> RequestPlan | None:
        """The response's replay after ``last_id``."""
        if self.response_id is None:
            return None
        params = {"stream": "true", "starting_after": last_id}
        return RequestPlan("GET", path("/v1/responses/{}", self.response_id), params=params, stream=True)


class _Resumption(Generic[D]):
    """The state both stream readers share: what was seen, whether the run ended, what to send next."""

    def __init__(self, first: RequestPlan, kind: StreamKind[D], retry: RetryPolicy) -> None:
        self.first = first.keyed()
        self.kind = kind
        self.retry = retry
        self.last_id: int | None = None
        self.ended = False
        self._drops = 0

    def next_plan(self) -> RequestPlan:
        """The first request again until an event was seen, then the route that reads on."""
        if self.last_id is None:
            return self.first
        return self.kind.follow(self.last_id) or self.first

    def accept(self, sse: ServerSentEvent) -> ServerEvent[D] | None:
        """The event to hand on, or ``None`` for one already handed on (a replay overlaps what was seen)."""
        event_id = int(sse.id) if sse.id.strip().lstrip("-").isdigit() else None
        if event_id is not None and self.last_id is not None and event_id <= self.last_id:
            return None
        data = self.kind.decode(sse.data)
        if event_id is not None:
            self.last_id = event_id
        self._drops = 0
        self.ended = self.kind.observe(data)
        return ServerEvent(event_id, sse.event, data)

    def closed_at_pause(self, cause: Exception | None) -> bool:
        """Whether the server closed the stream cleanly where the run paused: the replay is whole."""
        return cause is None and self.kind.paused

    def dropped(self, cause: Exception | None) -> float:
        """The wait before reading on after the stream ended early; raises when it keeps ending without progress."""
        if self._drops >= self.retry.max_retries:
            where = f" after event {self.last_id}" if self.last_id is not None else ""
            raise APIConnectionError(f"the event stream ended before the run did{where}") from cause
        self._drops += 1
        return self.retry.backoff(self._drops - 1)


class Stream(Generic[D]):
    """The events of one run, read on across dropped connections; iterate it once.

    Use it as a context manager (or call :meth:`close`) to stop reading early.
    """

    def __init__(self, transport: SyncTransport, first: RequestPlan, kind: StreamKind[D]) -> None:
        self._transport = transport
        self._state = _Resumption(first, kind, transport.options.retry)
        self._events = self._read()

    def __iter__(self) -> Iterator[ServerEvent[D]]:
        return self._events

    def __next__(self) -> ServerEvent[D]:
        return next(self._events)

    def __enter__(self) -> Stream[D]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop reading and close the connection."""
        self._events.close()

    def _read(self) -> Generator[ServerEvent[D], None, None]:
        state = self._state
        while not state.ended:
            response = self._transport.send(state.next_plan())
            cause: Exception | None = None
            try:
                for sse in EventSource(response).iter_sse():
                    if (event := state.accept(sse)) is not None:
                        yield event
                    if state.ended:
                        return
            except httpx.TransportError as exc:
                cause = exc
            finally:
                response.close()
            if state.closed_at_pause(cause):
                return
            time.sleep(state.dropped(cause))


class AsyncStream(Generic[D]):
    """The events of one run, read on across dropped connections; iterate it once with ``async for``.

    Use it as an async context manager (or call :meth:`aclose`) to stop reading early.
    """

    def __init__(self, transport: AsyncTransport, first: RequestPlan, kind: StreamKind[D]) -> None:
        self._transport = transport
        self._state = _Resumption(first, kind, transport.options.retry)
        self._events = self._read()

    def __aiter__(self) -> AsyncIterator[ServerEvent[D]]:
        return self._events

    async def __anext__(self) -> ServerEvent[D]:
        return await anext(self._events)

    async def __aenter__(self) -> AsyncStream[D]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop reading and close the connection."""
        await self._events.aclose()

    async def _read(self) -> AsyncGenerator[ServerEvent[D], None]:
        state = self._state
        while not state.ended:
            response = await self._transport.send(state.next_plan())
            cause: Exception | None = None
            try:
                async for sse in EventSource(response).aiter_sse():
                    if (event := state.accept(sse)) is not None:
                        yield event
                    if state.ended:
                        return
            except httpx.TransportError as exc:
                cause = exc
            finally:
                await response.aclose()
            if state.closed_at_pause(cause):
                return
            await asyncio.sleep(state.dropped(cause))
