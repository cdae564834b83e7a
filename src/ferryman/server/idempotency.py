"""``Idempotency-Key``: a repeated POST gets the first call's answer instead of running again.

The first call with a key claims it in the store (pending), runs, and stores
its answer: status, headers and body of a JSON answer; for a stream, a pointer
to where its events can be read again, stored as soon as the first frame names
the run. A repeat with the same key and the same request (see
:func:`~ferryman.server.idempotent_routes.fingerprint`) within the key's
lifetime gets that answer with ``Idempotent-Replayed: true``; a streamed one is
replayed through the route that replays events, from the first event on, live
if the run goes on. A repeat with another request is a 422, one while the first
call still runs (before its stream started) a 409. A first call that ends in
5xx, 409 or 429 gives the key back, so that a retry may run.

A pending claim holds a short lease that the call renews while it runs, so a
replica that died mid-call does not keep the key in use for a whole day.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ferryman.auth.principal import current_principal
from ferryman.errors import FailureCode
from ferryman.inference.provider_data import HEADER as PROVIDER_DATA_HEADER
from ferryman.metrics import instruments as metrics
from ferryman.storage.base import IdempotencyRecord, IdempotencyStore

from .errors import error_body
from .idempotent_routes import (
    FrameSplitter,
    IdempotentRoute,
    Replay,
    ends_run,
    fingerprint,
    match,
    normalised,
    parse_frame,
)

log = logging.getLogger(__name__)

KEY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = (b"idempotent-replayed", b"true")
PROVIDER_DATA = PROVIDER_DATA_HEADER.lower().encode()
MAX_KEY_LENGTH = 255
KEY_LIFETIME = timedelta(hours=24)
PENDING_LEASE = timedelta(seconds=60)
# Answers a retry could change: the key goes back and the retry runs.
_RETRYABLE = {409, 429}
# Answers the client fixes by sending another header with the same request (its provider key).
_FIXABLE_BY_RETRY = {FailureCode.PROVIDER_KEY_REJECTED}
# A first frame longer than this names no run we know.
_FIRST_FRAME_LIMIT = 64 * 1024


def principal_owner(scope: Scope) -> str:
    """The owner of a request's key: its principal's qualified name ('' without authentication: one shared space).

    The authentication middleware runs outside this one, so the principal is known here.
    """
    principal = current_principal.get()
    return "" if principal is None else principal.qualified


class IdempotencyMiddleware:
    """Pure ASGI middleware that makes the POSTs of ``routes`` idempotent under a key.

    Args:
        app: The app it wraps.
        routes: The POST routes that take a key (see :func:`~ferryman.server.idempotent_routes.idempotent_routes`).
        store: Where keys live (shared by every replica).
        owner: The caller a request's key belongs to (keys are scoped by it).
        lifetime: How long a key answers repeats.
        lease: How long a pending claim lasts unrenewed; renewed every third of it.
    """

    def __init__(
        self,
        app: ASGIApp,
        routes: Sequence[IdempotentRoute],
        store: IdempotencyStore,
        owner: Callable[[Scope], str] = principal_owner,
        lifetime: timedelta = KEY_LIFETIME,
        lease: timedelta = PENDING_LEASE,
    ) -> None:
        self.app, self.routes, self.store = app, routes, store
        self.owner, self.lifetime, self.lease = owner, lifetime, lease

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass through everything but a keyed POST to an idempotent route."""
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        key, path = _header(scope, b"idempotency-key"), normalised(_route_path(scope))
        found = match(self.routes, path) if key is not None else None
        if key is None or found is None:
            await self.app(scope, receive, send)
            return
        if not 0 < len(key) <= MAX_KEY_LENGTH:
            message = f"the {KEY_HEADER} header must be 1 to {MAX_KEY_LENGTH} characters long"
            await JSONResponse(error_body("invalid_request", message, field=KEY_HEADER), 400)(scope, receive, send)
            return
        body = await _read_body(receive)
        now = datetime.now(UTC)
        claim = IdempotencyRecord(
            self.owner(scope),
            key,
            uuid.uuid4().hex,
            fingerprint(path, body, _header(scope, PROVIDER_DATA)),
            now,
            now + self.lease,
        )
        held = await self.store.claim_idempotency_key(claim, now)
        if held is None:
            await self._first_call(scope, _body_then(body, receive), send, claim, found)
        elif held.fingerprint != claim.fingerprint:
            message = f"this {KEY_HEADER} was used with a different request; use a new key for a new request"
            await JSONResponse(error_body("idempotency_key_reused", message), 422)(scope, receive, send)
        elif held.result is None:
            message = f"the first request with this {KEY_HEADER} is still running; retry later"
            answer = JSONResponse(error_body("idempotency_key_in_use", message), 409, headers={"Retry-After": "1"})
            await answer(scope, receive, send)
        else:
            await self._replay(scope, receive, send, json.loads(held.result))

    async def _first_call(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        claim: IdempotencyRecord,
        found: tuple[IdempotentRoute, dict[str, str]],
    ) -> None:
        call = _FirstCall(send, self, claim, found)
        renewing = asyncio.create_task(self._keep(claim))
        try:
            await self.app(scope, receive, call.send)
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            await call.settle()

    async def _keep(self, claim: IdempotencyRecord) -> None:
        """Renew a pending claim's lease until cancelled."""
        while True:
            await asyncio.sleep(self.lease.total_seconds() / 3)
            try:
                if not await self.store.renew_idempotency_key(claim, datetime.now(UTC) + self.lease):
                    return
            except Exception:  # a database blip: the next renewal may pass, before the lease ends
                log.warning("idempotency key lease not renewed", exc_info=True)

    async def complete(self, claim: IdempotencyRecord, result: dict[str, Any]) -> None:
        """Store a first call's outcome for the rest of the key's lifetime."""
        stored = await self.store.complete_idempotency_key(claim, json.dumps(result), claim.created_at + self.lifetime)
        if not stored:  # the claim lapsed (this call outlived its lease) and another call took the key
            log.warning("an idempotency key was taken over while its first call ran: both calls ran")

    async def _replay(self, scope: Scope, receive: Receive, send: Send, result: dict[str, Any]) -> None:
        metrics.replayed()
        if "replay" not in result:
            headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in result["headers"]]
            await send(
                {"type": "http.response.start", "status": result["status"], "headers": [*headers, REPLAYED_HEADER]}
            )
            await send({"type": "http.response.body", "body": result["body"].encode()})
            return
        replay = Replay.from_json(result["replay"])
        query, extra = replay.query_and_headers()
        dropped = {b"content-length", b"content-type", b"idempotency-key", b"last-event-id", b"transfer-encoding"}
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in dropped]
        path = scope.get("root_path", "") + replay.path
        get = {**scope, "method": "GET", "path": path, "raw_path": path.encode(), "query_string": query.encode()}
        reader = _ReplayedStream(send, replay.one_run)
        with contextlib.suppress(_ReplayEnded):
            await self.app({**get, "headers": [*headers, *extra]}, _body_then(b"", receive), reader.send)


class _FirstCall:
    """Watches the answer of a key's first call on its way out, and stores (or gives back) the key."""

    def __init__(
        self,
        send: Send,
        middleware: IdempotencyMiddleware,
        claim: IdempotencyRecord,
        found: tuple[IdempotentRoute, dict[str, str]],
    ) -> None:
        self._send, self._middleware, self._claim = send, middleware, claim
        self._route, self._params = found
        self._status: int | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._body = bytearray()
        self._stream = False
        self._watched = False
        self._first_frame = FrameSplitter()
        self._settled = False

    async def send(self, message: Message) -> None:
        """Forward one ASGI message, storing the replay pointer before the frame that names it goes out."""
        if message["type"] == "http.response.start":
            self._status, self._headers = message["status"], list(message.get("headers", []))
            content_type = dict(self._headers).get(b"content-type", b"")
            self._stream = content_type.startswith(b"text/event-stream")
        elif message["type"] == "http.response.body":
            if self._stream:
                await self._watch_stream(message.get("body", b""))
            else:
                self._body += message.get("body", b"")
        await self._send(message)

    async def _watch_stream(self, chunk: bytes) -> None:
        if self._watched or self._route.stream is None or self._status != 200:
            return
        frames = self._first_frame.feed(chunk)
        if not frames and len(self._first_frame.pending) < _FIRST_FRAME_LIMIT:
            return
        self._watched = True
        first = parse_frame((frames[0] if frames else self._first_frame.pending).decode("utf-8", "replace"))
        replay = self._route.stream(self._params, first)
        if replay is None:
            # Nothing to replay from (a response not stored, or an unknown first frame): the key stays in use
            # while this call runs, and is given back when it ends.
            return
        self._settled = True
        await self._middleware.complete(self._claim, {"replay": replay.to_json()})

    async def settle(self) -> None:
        """Once the call is over: store a JSON answer worth repeating, give the key back otherwise."""
        if self._settled:
            return
        self._settled = True
        status = self._status
        if status is not None and not self._stream and _worth_keeping(status, self._body):
            try:
                body = self._body.decode()
            except UnicodeDecodeError:
                body = None
            if body is not None:
                headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in self._headers]
                await self._middleware.complete(self._claim, {"status": status, "headers": headers, "body": body})
                return
        await self._middleware.store.release_idempotency_key(self._claim)


def _worth_keeping(status: int, body: bytes | bytearray) -> bool:
    """Whether a JSON answer is what every repeat should get: not one a retry could change."""
    if status >= 500 or status in _RETRYABLE:
        return False
    try:
        code = json.loads(body).get("error", {}).get("code")
    except (ValueError, AttributeError):
        return True
    return code not in _FIXABLE_BY_RETRY


class _ReplayEnded(Exception):
    """A replayed turn stream reached the end of the run it replays."""


class _ReplayedStream:
    """Marks a replayed stream as such and, for a turn, ends it with the run it replays."""

    def __init__(self, send: Send, one_run: bool) -> None:
        self._send, self._one_run = send, one_run
        self._frames = FrameSplitter()

    async def send(self, message: Message) -> None:
        """Forward one message of the replaying GET."""
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), REPLAYED_HEADER]}
        elif message["type"] == "http.response.body" and self._one_run:
            for frame in self._frames.feed(message.get("body", b"")):
                await self._send({"type": "http.response.body", "body": frame, "more_body": True})
                if ends_run(parse_frame(frame.decode("utf-8", "replace"))):
                    await self._send({"type": "http.response.body", "body": b"", "more_body": False})
                    raise _ReplayEnded
            if message.get("more_body", False):
                return
            message = {**message, "body": self._frames.pending}
        await self._send(message)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).decode("latin-1").strip()
    return None


def _route_path(scope: Scope) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path.removeprefix(root) if root and path.startswith(root) else path


async def _read_body(receive: Receive) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body)
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return bytes(body)


def _body_then(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` (already read) first, then what the client sends next (its disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
