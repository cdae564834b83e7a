"""``Idempotency-Key``: a repeated create gets the first call's outcome instead of running again.

The first call with a key claims it (pending) and, once it knows its outcome,
completes it: the run it started (a turn's run, a stored response), which a
repeat reads again from storage, live while it goes on; the record it made (an
agent, a session), claimed by the write that makes it, which a repeat is
answered with as the first call was; or the answer it gave, for any other
create answered before or without a run to read again. A repeat of the same request (same
:class:`IdempotencyKey` fingerprint) within the key's lifetime gets that
outcome; one with another request is refused (:class:`IdempotencyKeyReusedError`),
and one while the first call runs and has no outcome yet is told to retry
(:class:`IdempotencyKeyInUseError`). A first call that fails in a way a retry
could change gives the key back.

A pending claim holds a short lease that its call renews while it runs, so a
replica that died mid-call does not hold the key for a whole day.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

from ferryman.errors import IdempotencyKeyInUseError, IdempotencyKeyReusedError
from ferryman.ids import new_hex
from ferryman.storage.base import IdempotencyRecord, IdempotencyStore, KeySettlement
from ferryman.storage.domain.records import Writer
from ferryman.storage.kernel.ops import Op
from ferryman.storage.kernel.protocol import Kernel

log = logging.getLogger(__name__)

KEY_HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
KEY_LIFETIME = timedelta(hours=24)
PENDING_LEASE = timedelta(seconds=60)


@dataclass(frozen=True)
class IdempotencyKey:
    """A request's key: whose (the caller's qualified name, '' without authentication), the key, and a
    digest of what makes two requests the same."""

    owner: str
    key: str
    fingerprint: str


@dataclass(frozen=True)
class StoredAnswer:
    """The answer a create gave at once: status, headers and JSON body."""

    status: int
    headers: list[tuple[str, str]]
    body: str


@dataclass(frozen=True)
class TurnReplay:
    """A run of a turn, read again from its events numbered above ``after`` up to the end of that run: streamed,
    or (``streamed`` false) answered with the turn its last event carries, as the first call answered."""

    agent_id: str
    session_id: str
    turn_id: str
    after: int
    streamed: bool = True


@dataclass(frozen=True)
class ResponseReplay:
    """A stored response's stream, read again from its events numbered above ``after``, shown with ``include``;
    or (``streamed`` false) answered with the response as its run left it, as the first call answered."""

    response_id: str
    after: int
    include: tuple[str, ...] = ()
    streamed: bool = True


@dataclass(frozen=True)
class CreatedRecord:
    """A create answered with the record it made, claimed by the write that made it: a repeat is answered from
    the record's kind and id as the first call was (see ``Endpoint.replay_record``)."""

    kind: str
    record_id: str


Outcome = StoredAnswer | TurnReplay | ResponseReplay | CreatedRecord


def encode_outcome(outcome: Outcome) -> str:
    """An outcome as stored with its key."""
    if isinstance(outcome, StoredAnswer):
        return json.dumps({"status": outcome.status, "headers": outcome.headers, "body": outcome.body})
    if isinstance(outcome, TurnReplay):
        turn = [outcome.agent_id, outcome.session_id, outcome.turn_id]
        return json.dumps({"turn": turn, "after": outcome.after, **({} if outcome.streamed else {"stream": False})})
    if isinstance(outcome, CreatedRecord):
        return json.dumps({"record": [outcome.kind, outcome.record_id]})
    shown = {"after": outcome.after, "include": list(outcome.include)}
    return json.dumps({"response": outcome.response_id, **shown, **({} if outcome.streamed else {"stream": False})})


def decode_outcome(text: str) -> Outcome:
    """A stored outcome (also as the HTTP middleware before this module stored it: see ``_legacy``)."""
    data = json.loads(text)
    if "turn" in data:
        agent_id, session_id, turn_id = data["turn"]
        return TurnReplay(agent_id, session_id, turn_id, int(data["after"]), bool(data.get("stream", True)))
    if "response" in data:
        streamed = bool(data.get("stream", True))
        return ResponseReplay(data["response"], int(data["after"]), tuple(data.get("include", ())), streamed)
    if "record" in data:
        kind, record_id = data["record"]
        return CreatedRecord(str(kind), str(record_id))
    if "replay" in data:
        return _legacy(data["replay"])
    return StoredAnswer(int(data["status"]), [(str(k), str(v)) for k, v in data["headers"]], data["body"])


def _legacy(replay: dict[str, Any]) -> Outcome:
    """A stream pointer as the earlier HTTP middleware stored it (a path to GET), for keys claimed before an
    upgrade: ``/v1/agents/A/session/S/turn/T/events`` or ``/v1/responses/R``."""
    parts = str(replay["path"]).strip("/").split("/")
    after = int(replay["after"])
    if len(parts) == 8 and parts[1] == "agents" and parts[7] == "events":
        return TurnReplay(parts[2], parts[4], parts[6], after)
    return ResponseReplay(parts[-1], after)


@dataclass
class Claim:
    """A key this call holds; its outcome, once stored, lasts until ``lasts_until``.

    Attributes:
        settled: The outcome is stored, or the key was given back: the call need do nothing more with it.
        with_record: The outcome went in with the record the call wrote (see :func:`stored`).
        deferred: The key is not stored yet: the write of the call's run claims it (see
            :meth:`IdempotencyKeys.deferred`); until then there is nothing to renew, complete or give back.
        keeps_record: The outcome stored is a record the call made (:class:`CreatedRecord`, see
            :func:`stored_record`): it stays the key's whatever the call answers after, since the record stays;
            a call that removes its record again forgets the key first (:func:`forget_stored`).
    """

    record: IdempotencyRecord
    lasts_until: datetime
    settled: bool = field(default=False)
    with_record: bool = field(default=False)
    deferred: bool = field(default=False)
    keeps_record: bool = field(default=False)

    def settlement(self, outcome: Outcome) -> KeySettlement:
        """The outcome to store with the record this call writes, in the same transaction (the service that
        writes it sets ``settled`` once the write is done)."""
        return KeySettlement(self.record, encode_outcome(outcome), self.lasts_until, claiming=self.deferred)

    @property
    def unstored(self) -> bool:
        """Nothing of the key is stored: a deferred claim whose write has not happened (or failed)."""
        return self.deferred and not self.with_record


class KeyAnswered(Exception):  # noqa: N818  (not an error: the answer is the earlier call's outcome)
    """The request's key already holds an earlier call's outcome, which answers this call.

    Attributes:
        outcome: What the earlier call did.
        token: The earlier call's claim token (see :meth:`IdempotencyKeys.forget_held`).
    """

    def __init__(self, outcome: Outcome, token: str) -> None:
        super().__init__("answered by the earlier call with this Idempotency-Key")
        self.outcome = outcome
        self.token = token


@dataclass
class KeyHold:
    """A keyed request's key until its call says how it claims it: at once, its outcome stored when the call
    ends, or with the run the call writes (one write for both: :meth:`IdempotencyKeys.deferred`).

    Attributes:
        keys: Where keys are claimed.
        key: The request's key.
        claim: The claim, once taken.
        ran: The run stored with the claim has ended, so a repeat can read how it ended, its failure too.
    """

    keys: IdempotencyKeys
    key: IdempotencyKey
    claim: Claim | None = None
    ran: bool = False

    async def take(self, with_run: bool) -> Claim:
        """The request's claim (taken once).

        Raises:
            KeyAnswered: an earlier call with the key has its outcome (claiming at once).
            IdempotencyKeyReusedError: the key was used with another request.
            IdempotencyKeyInUseError: the earlier call still runs and has no outcome yet.
        """
        if self.claim is None:
            if with_run:
                self.claim = self.keys.deferred(self.key)
            else:
                await self.claim_now()
        assert self.claim is not None
        return self.claim

    async def claim_now(self) -> Claim:
        """Claim the key at once (also in place of a deferred claim whose write never stored it: a call that
        failed before that write answers as one that claimed first would have).

        Raises:
            KeyAnswered: an earlier call with the key has its outcome.
            IdempotencyKeyReusedError: the key was used with another request.
            IdempotencyKeyInUseError: the earlier call still runs and has no outcome yet.
        """
        claimed = await self.keys.claim(self.key)
        if isinstance(claimed, KeyAnswered):
            raise claimed
        self.claim = claimed
        return claimed


def settlement(claim: Claim | None, outcome: Outcome) -> KeySettlement | None:
    """What the write that makes a keyed call's record stores with its key (None: the call has no key)."""
    return None if claim is None else claim.settlement(outcome)


def answered(body: BaseModel) -> StoredAnswer:
    """A create's answer with ``body`` as its JSON, as the edge encodes it: what a create whose answer is known
    before it writes stores with its record (:func:`keyed_write`), for a repeat to get byte for byte."""
    return StoredAnswer(200, [("content-type", "application/json")], body.model_dump_json())


def keyed_write(kernel: Kernel, keyed: IdempotencyStore | None, settle: KeySettlement | None) -> Writer:
    """What runs the batch that writes a keyed create's records: one that stores ``settle``'s key outcome in
    the same transaction (or script), or the kernel's own when the call has no key.

    Raises:
        TypeError: the call has a key, but its service was built with nowhere to store keys (``keyed``).
    """
    if settle is None:
        return kernel.write
    if keyed is None:
        raise TypeError("this service stores no idempotency keys with its records: construct it with keyed=")

    async def write(batch: Sequence[Op]) -> list[Any]:
        return await keyed.write_keyed(batch, settle)

    return write


def stored(claim: Claim | None) -> None:
    """Note that the write carrying the claim's settlement is done: the key is no longer pending."""
    if claim is not None:
        claim.settled = claim.with_record = True


def stored_record(claim: Claim | None) -> None:
    """Note that the write of the record the claim's outcome names (:class:`CreatedRecord`) is done: the key
    answers with that record from now on, whatever the call answers after."""
    if claim is not None:
        stored(claim)
        claim.keeps_record = True


async def forget_stored(store: IdempotencyStore, claim: Claim | None) -> None:
    """Forget a key stored with a run that will never run, or with a record removed again (nothing without
    one), so that a repeat runs again instead of reading nothing; the call that stored it does so before
    removing the run or the record."""
    if claim is not None and claim.with_record:
        claim.with_record = False
        await store.forget_idempotency_key(claim.record)


class IdempotencyKeys:
    """Claims, completes and gives back keys in the store every replica shares.

    Args:
        store: Where keys live.
        lifetime: How long a key answers repeats, from its claim.
        lease: How long a pending claim lasts unrenewed; renewed every third of it while its call runs.
    """

    def __init__(
        self, store: IdempotencyStore, lifetime: timedelta = KEY_LIFETIME, lease: timedelta = PENDING_LEASE
    ) -> None:
        self._store, self._lifetime, self._lease = store, lifetime, lease

    async def claim(self, key: IdempotencyKey) -> Claim | KeyAnswered:
        """Claim ``key`` for this call, or return the outcome of the first call that held it (and that call's token).

        Raises:
            IdempotencyKeyReusedError: the key was used with another request.
            IdempotencyKeyInUseError: the first call with the key still runs and has no outcome yet.
        """
        now = datetime.now(UTC)
        record = IdempotencyRecord(key.owner, key.key, new_hex(), key.fingerprint, now, now + self._lease)
        held = await self._store.claim_idempotency_key(record, now)
        if held is None:
            return Claim(record, now + self._lifetime)
        return KeyAnswered(self.answer(key, held.fingerprint, held.result), held.token)

    def deferred(self, key: IdempotencyKey) -> Claim:
        """A claim of ``key`` that the write of the call's run stores with that run, in one transaction or
        script: the write raises ``IdempotencyKeyHeldError`` instead when an earlier call holds the key
        (answered with :meth:`answer`). No pending state, so no lease: the key and its run are stored together."""
        now = datetime.now(UTC)
        record = IdempotencyRecord(key.owner, key.key, new_hex(), key.fingerprint, now, now + self._lifetime)
        return Claim(record, now + self._lifetime, deferred=True)

    def answer(self, key: IdempotencyKey, fingerprint: str, result: str | None) -> Outcome:
        """The outcome that answers a repeat of ``key`` held with ``fingerprint`` and ``result``.

        Raises:
            IdempotencyKeyReusedError: the key was used with another request.
            IdempotencyKeyInUseError: the first call still runs and has no outcome yet.
        """
        if fingerprint != key.fingerprint:
            raise IdempotencyKeyReusedError(
                f"this {KEY_HEADER} was used with a different request; use a new key for a new request"
            )
        if result is None:
            raise IdempotencyKeyInUseError(f"the first request with this {KEY_HEADER} is still running; retry later")
        return decode_outcome(result)

    async def complete(self, claim: Claim, outcome: Outcome) -> None:
        """Store the claim's outcome for the rest of the key's lifetime (once: later calls do nothing; nor does
        a claim with nothing stored, whose call keeps no answer)."""
        if claim.settled or claim.unstored:
            return
        claim.settled = True
        if not await self._store.complete_idempotency_key(claim.record, encode_outcome(outcome), claim.lasts_until):
            # The claim lapsed (this call outlived its lease) and another call took the key: both ran.
            log.warning("an idempotency key was taken over while its first call ran: both calls ran")

    async def forget_held(self, key: IdempotencyKey, token: str) -> None:
        """Give back a key an earlier call holds with the claim ``token`` (not a later claim of it), result or not:
        that call's run failed in a way a retry could change, and the call is gone (its replica died)."""
        now = datetime.now(UTC)
        held = IdempotencyRecord(key.owner, key.key, token, key.fingerprint, now, now)
        await self._store.forget_idempotency_key(held)

    async def release(self, claim: Claim) -> None:
        """Give the key back (unless its outcome is stored), so that a retry runs."""
        if claim.settled or claim.unstored:
            return
        claim.settled = True
        await self._store.release_idempotency_key(claim.record)

    async def give_back(self, claim: Claim) -> None:
        """Give the key back after the call failed, also when its outcome went in with the record it wrote: a
        run whose call failed before it was launched never ran, and a retry runs it. A record the call made
        and kept (``keeps_record``) keeps its key: a retry is answered with it."""
        if claim.keeps_record and claim.with_record:
            return
        if claim.with_record:
            await forget_stored(self._store, claim)
        else:
            await self.release(claim)

    @contextlib.asynccontextmanager
    async def held(self, hold: KeyHold) -> AsyncIterator[None]:
        """Renew the lease of the hold's claim, once taken, while the block runs (until its outcome is stored)."""
        renewing = asyncio.create_task(self._renew(hold))
        try:
            yield
        finally:
            renewing.cancel()
            await asyncio.wait([renewing])  # its own cancellation stays its own; the caller's goes on

    async def _renew(self, hold: KeyHold) -> None:
        while True:
            await asyncio.sleep(self._lease.total_seconds() / 3)
            claim = hold.claim
            if claim is None:  # not taken yet
                continue
            if claim.settled or claim.deferred:
                return
            try:
                if not await self._store.renew_idempotency_key(claim.record, datetime.now(UTC) + self._lease):
                    return
            except Exception:  # a database blip: the next renewal may pass, before the lease ends
                log.warning("idempotency key lease not renewed", exc_info=True)
