"""``Idempotency-Key`` at the edge: which request a key names, and how a repeat gets the first call's outcome.

Every route that creates or runs something (``Endpoint.creates``) is wrapped by
:func:`keyed`. A request with a key claims it through
:class:`~ferryman.services.idempotency.IdempotencyKeys` before its handler runs,
or, on a route marked ``key_with_run`` (a turn), by the write that stores the
run its handler starts (:func:`take_key`: one trip for both; a key found held
there is answered as a claim would be). A run that streams, and any turn, stores
itself as the key's outcome as it starts, and a repeat reads that run's events
again from storage (a turn that did not stream is answered with the turn its
run's last event carries); any other answer is kept as it was given. The key goes back when the
first call's answer is one a retry could change (5xx, 409, 429, a rejected
provider key), or when its stream ends with nothing to read it again from (a
response not stored).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from ferryman.api.agents import Turn
from ferryman.api.response_events import ResponseCancelled, ResponseCompleted, ResponseFailed, ResponseIncomplete
from ferryman.api.responses import Response as ResponseObject
from ferryman.auth.principal import current_principal
from ferryman.errors import (
    FailureCode,
    FerrymanError,
    IdempotencyKeyInUseError,
    InternalError,
    InvalidRequestError,
    NotFoundError,
    RunNotStartedError,
)
from ferryman.inference.provider_data import HEADER as PROVIDER_DATA_HEADER
from ferryman.metrics import instruments as metrics
from ferryman.services.agents import AgentService
from ferryman.services.idempotency import (
    KEY_HEADER,
    MAX_KEY_LENGTH,
    Claim,
    CreatedRecord,
    IdempotencyKey,
    IdempotencyKeys,
    KeyAnswered,
    KeyHold,
    ResponseReplay,
    StoredAnswer,
    TurnReplay,
)
from ferryman.services.responses.included import ended_answer
from ferryman.services.turn_stream import ends_run, failed_turn, run_answer
from ferryman.storage.base import IdempotencyKeyHeldError
from ferryman.turn_records import StoredEvent

from .errors import error_response
from .http import JSONModelResponse, event_stream, services

Handler = Callable[[Request], Awaitable[Response]]
RecordAnswer = Callable[[str], Response]
"""How a create answered with its record answers, given the record's id (see ``Endpoint.replay_record``)."""
ALPHA_PREFIX = "/v1alpha/"
REPLAYED = {"Idempotent-Replayed": "true"}
# Answers a retry could change: the key goes back and the retry runs.
_RETRYABLE = {409, 429}
# Answers the client fixes by sending another header with the same request (its provider key).
_FIXABLE_BY_RETRY = {FailureCode.PROVIDER_KEY_REJECTED}
_BOUNDARY = re.compile(r';\s*boundary="?([^";]+)"?', re.IGNORECASE)


def normalised(path: str) -> str:
    """The path with the Agents API's ``/v1alpha`` prefix read as ``/v1``: the same routes, the same keys."""
    if path.startswith(f"{ALPHA_PREFIX}agents"):
        return "/v1/" + path.removeprefix(ALPHA_PREFIX)
    return path


def fingerprint(path: str, body: bytes, provider_data: str | None = None, content_type: str = "") -> str:
    """What makes two requests "the same": the normalised path, the body (JSON compared by value; a multipart
    form byte by byte but for its boundary, which a client draws afresh for each request) and the provider data
    header (its keys change what runs; only this digest of them is kept)."""
    boundary = _BOUNDARY.search(content_type) if content_type.startswith("multipart/") else None
    if boundary is not None:
        canonical = body.replace(boundary.group(1).encode("latin-1"), b"")
    else:
        try:
            canonical = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode()
        except ValueError:  # not JSON (or not UTF-8): the route answers 400, compared byte by byte
            canonical = body
    header = hashlib.sha256((provider_data or "").encode()).hexdigest()
    return hashlib.sha256(f"POST {path}\n{header}\n".encode() + canonical).hexdigest()


async def request_key(request: Request) -> IdempotencyKey | None:
    """The request's key (None: it has none).

    Raises:
        InvalidRequestError: the key is empty or longer than 255 characters.
    """
    key = request.headers.get(KEY_HEADER)
    if key is None:
        return None
    key = key.strip()
    if not 0 < len(key) <= MAX_KEY_LENGTH:
        raise InvalidRequestError(f"the {KEY_HEADER} header must be 1 to {MAX_KEY_LENGTH} characters long", KEY_HEADER)
    path = normalised(request.scope["path"].removeprefix(request.scope.get("app_root_path", "")))
    body = await request.body()  # kept by the request: the handler reads it again
    principal = current_principal.get()
    owner = "" if principal is None else principal.qualified
    headers = request.headers
    digest = fingerprint(path, body, headers.get(PROVIDER_DATA_HEADER), headers.get("content-type", ""))
    return IdempotencyKey(owner, key, digest)


def keyed(handler: Handler, with_run: bool = False, replay_record: RecordAnswer | None = None) -> Handler:
    """``handler`` answering a repeat of a keyed request with the first call's outcome.

    ``with_run``: the handler takes the key itself (:func:`take_key`), so that a run it starts, or a record it
    makes, can claim the key in the write that stores it; otherwise the key is claimed before the handler runs.
    ``replay_record`` answers a repeat of a create answered with its record, from the record's id.
    """

    @functools.wraps(handler)
    async def answer(request: Request) -> Response:
        key = await request_key(request)
        if key is None:
            return await handler(request)
        keys = services(request).idempotency
        hold = KeyHold(keys, key)
        request.state.idempotency = hold
        try:
            if not with_run:
                await hold.take(with_run=False)
            return await _first_call(request, handler, keys, hold)
        except KeyAnswered as answered:
            outcome, token = answered.outcome, answered.token
        except IdempotencyKeyHeldError as held:  # the run's write found the key held: it wrote nothing
            outcome, token = keys.answer(key, held.fingerprint, held.result), held.token
        metrics.replayed()
        if isinstance(outcome, CreatedRecord):
            return _replayed_record(outcome, replay_record)
        return await _replay(request, outcome, functools.partial(keys.forget_held, key, token))

    return answer


async def take_key(request: Request, with_run: bool = True) -> Claim | None:
    """The key of a request whose handler takes it itself (``keyed(..., with_run=True)``), for the service to
    store with the run it starts, claiming the key in that write (None: the request has no key); or, when the
    request starts no run to store it with (``with_run`` false), claimed at once, its answer kept at the end.

    Raises:
        KeyAnswered: claiming at once, an earlier call with the key has its outcome.
        IdempotencyKeyReusedError: claiming at once, the key was used with another request.
        IdempotencyKeyInUseError: claiming at once, the earlier call still runs and has no outcome yet.
    """
    hold: KeyHold | None = getattr(request.state, "idempotency", None)
    if hold is None:
        return None
    return await hold.take(with_run=with_run)


def run_ended(request: Request) -> None:
    """Note that the run a keyed request stored with its key has ended (see :attr:`KeyHold.ran`)."""
    hold: KeyHold | None = getattr(request.state, "idempotency", None)
    if hold is not None:
        hold.ran = True


async def _first_call(request: Request, handler: Handler, keys: IdempotencyKeys, hold: KeyHold) -> Response:
    try:
        async with keys.held(hold):
            response = await handler(request)
    except (KeyAnswered, IdempotencyKeyHeldError):
        raise  # this call holds nothing
    except FerrymanError as exc:
        claim = hold.claim
        if claim is not None and claim.unstored:
            # Its run's write never stored the key: claim it now, as a call that claimed first would have, so
            # that an earlier call's outcome answers instead (this call was refused for what that one started:
            # a quota slot, a busy session) and this answer is kept like any other.
            claim = await asyncio.shield(hold.claim_now())
        if claim is not None:
            if claim.with_record and not (hold.ran and _worth_keeping(error_response(exc))):
                # Stored with a run that failed to launch (nothing to read again), or that failed in a way a
                # retry could change; a run that ended with any other failure keeps it, read again by a repeat.
                await asyncio.shield(keys.give_back(claim))
            elif not claim.with_record:
                await asyncio.shield(_settle(keys, claim, error_response(exc)))
        raise
    except BaseException:
        if hold.claim is not None:
            await asyncio.shield(keys.give_back(hold.claim))
        raise
    claim = hold.claim
    if claim is None:
        return response
    if claim.unstored and not isinstance(response, StreamingResponse):
        # Its call wrote nothing to store the key with (a registration repeated as it stands): the key is
        # claimed now and keeps this answer, as a call that claimed first would have.
        claim = await asyncio.shield(hold.claim_now())
    if isinstance(response, StreamingResponse):
        if claim.settled or claim.unstored:
            return response
        # Nothing to read it again from: the key is held while it streams, and given back however it ends.
        return cast(Response, _HeldWhileStreaming(response, keys, hold))
    await _settle(keys, claim, response)
    return response


async def _settle(keys: IdempotencyKeys, claim: Claim, response: Response) -> None:
    """Keep an answer every repeat should get; give the key back after one a retry could change."""
    if _worth_keeping(response):
        headers = [(name, value) for name, value in response.headers.items() if name != "content-length"]
        await keys.complete(claim, StoredAnswer(response.status_code, headers, bytes(response.body).decode()))
    else:
        await keys.release(claim)


def _worth_keeping(response: Response) -> bool:
    status = response.status_code
    if status >= 500 or status in _RETRYABLE:
        return False
    try:
        code = json.loads(bytes(response.body)).get("error", {}).get("code")
    except (ValueError, AttributeError):
        return True
    return code not in _FIXABLE_BY_RETRY


class _HeldWhileStreaming:
    """An answer streamed while its key is held, the key given back however the stream ends: done, failed, or
    its client gone (a cancelled send, or one that raised)."""

    def __init__(self, response: StreamingResponse, keys: IdempotencyKeys, hold: KeyHold) -> None:
        self._response, self._keys, self._hold = response, keys, hold

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with self._keys.held(self._hold):
                await self._response(scope, receive, send)
        finally:
            if self._hold.claim is not None:
                await asyncio.shield(self._keys.release(self._hold.claim))


def _replayed_record(outcome: CreatedRecord, replay_record: RecordAnswer | None) -> Response:
    """The answer of a create answered with its record, as its first call gave it, marked as a replay.

    Raises:
        InternalError: the route answers no repeat from a record (a key whose fingerprint names this route
            cannot hold one).
    """
    if replay_record is None:
        raise InternalError(f"this route answers no repeat from a record ({outcome.kind} {outcome.record_id})")
    response = replay_record(outcome.record_id)
    response.headers.update(REPLAYED)
    return response


async def _replay(
    request: Request, outcome: StoredAnswer | TurnReplay | ResponseReplay, give_back: Callable[[], Awaitable[None]]
) -> Response:
    """The first call's outcome, marked as a replay; ``give_back`` frees the key the first call holds.

    Raises:
        IdempotencyKeyInUseError: the first call stored its run but failed before launching it, and is giving
            its key back, or its non-streamed turn failed in a way a retry could change: a retry runs the request.
    """
    if isinstance(outcome, StoredAnswer):
        headers = dict(outcome.headers) | REPLAYED
        return Response(outcome.body, outcome.status, headers)
    try:
        if isinstance(outcome, TurnReplay) and not outcome.streamed:
            response = await _turn_answer(request, outcome, give_back)
        elif isinstance(outcome, ResponseReplay) and not outcome.streamed:
            response = await _response_answer(request, outcome, give_back)
        else:
            response = await _replayed_run(request, outcome)
    except RunNotStartedError as exc:
        raise IdempotencyKeyInUseError(f"the first request with this {KEY_HEADER} failed; retry") from exc
    response.headers.update(REPLAYED)
    return response


async def _turn_answer(request: Request, outcome: TurnReplay, give_back: Callable[[], Awaitable[None]]) -> Response:
    """What a non-streamed turn's first call answered: the turn its run's last event carries (waiting for a run
    still going, as that call waits), or the failure the run ended with, kept like any answer unless a retry
    could change it; then the key is given back (its call may be gone with its replica) and this call retries."""
    agents = services(request).agents
    try:
        events = await agents.turn_events(outcome.agent_id, outcome.session_id, outcome.turn_id, outcome.after)
    except NotFoundError as exc:
        raise await _gone(outcome, give_back) from exc
    last = None
    async for event in _one_run(events):
        last = event
    try:
        turn = run_answer(last) if last is not None and ends_run(last) else await _stored_turn(agents, outcome)
    except NotFoundError as exc:
        raise await _gone(outcome, give_back) from exc
    except (IdempotencyKeyInUseError, RunNotStartedError):
        raise
    except FerrymanError as exc:
        return await _kept_failure(exc, give_back)
    return JSONModelResponse(turn)


async def _response_answer(
    request: Request, outcome: ResponseReplay, give_back: Callable[[], Awaitable[None]]
) -> Response:
    """What a non-streamed response's first call answered: the response as its run left it (waiting for a run
    still going, as that call waits), or the failure it ended with, kept like any answer unless a retry could
    change it; then the key is given back (its call may be gone with its replica) and this call retries.

    Raises:
        NotFoundError: the response was deleted since.
    """
    responses = services(request).responses
    include = frozenset(outcome.include)
    # A response deleted since (a rollback, a DELETE) is a 404, as for a streamed repeat, and the key stays: a
    # retry must not run it a second time. (One its first call removed before launching its run gave the key
    # back first, so a repeat finds no key.)
    last = None
    async for event in await responses.replay(outcome.response_id, outcome.after, include):
        last = event  # followed to the run's end, as its first call waited for it
    # The run's last event carries the response as it ended; a replica that failed a dead one's run stores the
    # response first, so one read after its events stopped short finds it there.
    ended = None if last is None else _ended_response(last)
    response = ended or await responses.get(outcome.response_id, include)
    if response.status in ("in_progress", "queued"):
        raise IdempotencyKeyInUseError(f"the first request with this {KEY_HEADER} is still running; retry later")
    try:
        return JSONModelResponse(ended_answer(response, include))
    except FerrymanError as exc:
        return await _kept_failure(exc, give_back)


_ENDING_EVENTS = frozenset(
    str(event.model_fields["type"].default)
    for event in (ResponseCompleted, ResponseIncomplete, ResponseFailed, ResponseCancelled)
)


def _ended_response(event: StoredEvent) -> ResponseObject | None:
    """The response an event that ends a response's stream carries (None: another event)."""
    data = json.loads(event.data)
    if data.get("type") not in _ENDING_EVENTS:
        return None
    return ResponseObject.model_validate(data["response"])


async def _kept_failure(exc: FerrymanError, give_back: Callable[[], Awaitable[None]]) -> Response:
    """The failure a first call's run ended with, as that call answered it, when every repeat should get it;
    else the key is given back and this call is told to retry.

    Raises:
        IdempotencyKeyInUseError: a retry could change the failure.
    """
    answer = error_response(exc)
    if _worth_keeping(answer):
        return answer
    await asyncio.shield(give_back())
    raise IdempotencyKeyInUseError(f"the first request with this {KEY_HEADER} failed; retry") from exc


async def _gone(outcome: TurnReplay, give_back: Callable[[], Awaitable[None]]) -> RunNotStartedError:
    """The key's turn is gone: removed by its first call before its run was launched (that call gives the key
    back too), or deleted since with its session. The key is given back, so that a retry runs the request and
    gets its own answer (a 404 for a session deleted since)."""
    await asyncio.shield(give_back())
    return RunNotStartedError(f"turn {outcome.turn_id} is gone")


async def _stored_turn(agents: AgentService, outcome: TurnReplay) -> Turn:
    """The turn as stored, when its run's events stop short of the run's end.

    Raises:
        FerrymanError: the turn failed (its failure, as its first call answered it).
        NotFoundError: the turn is gone.
        IdempotencyKeyInUseError: the turn has not ended yet.
    """
    turn = await agents.get_turn(outcome.agent_id, outcome.session_id, outcome.turn_id)
    if turn.status == "failed" and turn.error is not None:
        raise failed_turn(turn.turn_id, turn.error.code, turn.error.message)
    if turn.status in ("in_progress", "queued"):
        raise IdempotencyKeyInUseError(f"the first request with this {KEY_HEADER} is still running; retry later")
    return turn


async def _replayed_run(request: Request, outcome: TurnReplay | ResponseReplay) -> Response:
    if isinstance(outcome, TurnReplay):
        agents = services(request).agents
        events = await agents.turn_events(outcome.agent_id, outcome.session_id, outcome.turn_id, outcome.after)
        return event_stream(_one_run(events))
    responses = services(request).responses
    replayed = await responses.replay(outcome.response_id, outcome.after, frozenset(outcome.include))
    return event_stream(replayed, named=True)


async def _one_run(events: AsyncIterator[StoredEvent]) -> AsyncIterator[StoredEvent]:
    """A turn's events up to the end of the first run among them (its later runs are other requests')."""
    try:
        async for event in events:
            yield event
            if ends_run(event):
                return
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
