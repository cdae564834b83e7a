"""What both façades run turns with, and what they do around a turn, written once.

A façade (the Agents API, the Responses API) brings only what differs: its
encoder of engine events, the name of a turn's event stream, and how it stores
a run's outcome. The turn host launches runs, numbers and publishes their
events (to this process's readers and, through the fan-out, to other
replicas), reads a stream wherever it runs, and closes the streams a dead
replica left.

Persist, then send: a run's event reaches this process's readers only once the
log that other replicas replay from holds it (the fan-out's stream, or storage
once the run is settled), so a replica that fails a dead one's turn numbers its
failure after every event any client received.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ferryman.api.webhooks import WebhookEventType
from ferryman.auth.principal import Principal
from ferryman.auth.quotas import HeldSlot, Quotas
from ferryman.coordination.base import CancelTurns, Fanout
from ferryman.coordination.follow import contiguous, follow_elsewhere
from ferryman.engine.channel import LiveRun, TurnRunner
from ferryman.engine.events import Emit, EngineEvent
from ferryman.engine.loop import TurnEngine
from ferryman.errors import ConflictError, InvalidRequestError, RunNotStartedError
from ferryman.storage.base import ExpiredTurn, Store, StoredEvent
from ferryman.webhooks.outbox import ArmedRun

from .leases import TurnLeases
from .record_guard import RecordGuard
from .run_metrics import RunMetrics
from .turn_queue import ROLLBACK_WAIT_SECONDS
from .usage import RunUsage, UsageLedger
from .webhooks import Webhooks

log = logging.getLogger(__name__)

PUBLISH_WAIT_SECONDS = 5.0
"""How long a run's end waits for the fan-out to store its last events before storage alone holds them."""
_CLOSE_ATTEMPTS = 20
"""How often a dead replica's stream is re-read when another writer took the failure's number first."""

S = TypeVar("S")
T = TypeVar("T")

Encode = Callable[[EngineEvent, int], list[str]]
"""A façade's encoder: the stream events (JSON data) one engine event becomes, numbered from the given number."""

StoredAfter = Callable[[int], Awaitable[list[StoredEvent]]]
"""The stored events of one stream numbered above the given number."""


class _Launch(asyncio.Event):
    """A run about to be launched: set once it is, or once the block that was to launch it failed."""

    failed = False


@dataclass
class RunOwner:
    """The owner of a run's record, read as the run starts (:meth:`TurnHost.reading_owner`): a record deleted while
    it runs takes its stored owner along, and its webhook delivery still needs it.

    Attributes:
        principal: The owner (None: unowned, or not read).
        read: Whether it was read.
    """

    principal: Principal | None = None
    read: bool = False


@dataclass(frozen=True)
class TurnHost:
    """The pieces the Agents API and the Responses API share to run turns, and what they do with them.

    Attributes:
        store: The storage backend.
        guard: The access step on the records runs make, and their owners.
        engine: The turn engine.
        runner: The turns running in this process (the one registry of live runs).
        leases: Leases of running turns.
        fanout: Live events and notices shared with other replicas.
        quotas: The callers' quotas of running turns (none by default).
        ledger: Where runs' token usage is stored (None: nowhere).
        webhooks: Where runs' ends are queued for their webhooks (None: no webhooks).
        rollback_wait_seconds: The most a ``rollback`` waits for the turn it cancelled to stop
            (``storage.rollback_wait_seconds``).
    """

    store: Store
    guard: RecordGuard
    engine: TurnEngine
    runner: TurnRunner
    leases: TurnLeases
    fanout: Fanout
    quotas: Quotas = field(default_factory=Quotas)
    ledger: UsageLedger | None = None
    webhooks: Webhooks | None = None
    rollback_wait_seconds: float = ROLLBACK_WAIT_SECONDS
    _launching: dict[str, list[_Launch]] = field(default_factory=dict, repr=False)

    async def check_webhook(self, url: str | None) -> None:
        """Refuse a run whose ``webhook`` cannot be delivered to (see :meth:`Webhooks.check`).

        Raises:
            InvalidRequestError: the URL is refused, or this server delivers no webhooks.
        """
        if url is None:
            return
        if self.webhooks is None:
            raise InvalidRequestError("this server delivers no webhooks", "webhook")
        await self.webhooks.check(url)

    async def notify(
        self,
        url: str | None,
        run_key: str,
        run_id: str,
        event: WebhookEventType | None,
        data: dict[str, Any],
        who: Principal | None,
    ) -> None:
        """Queue a run's end for its webhook, its delivery owned by ``who`` (the run's owner: see
        :meth:`owner_of`); nothing without a webhook, or for a state that ends no run."""
        if url is None or event is None or self.webhooks is None:
            return
        await self.webhooks.notify(url, run_key, run_id, event, data, who)

    def reading_owner(
        self, run: Callable[[Emit], Awaitable[T]], kind: str, record_id: str, owner: RunOwner
    ) -> Callable[[Emit], Awaitable[T]]:
        """``run``, reading the owner of its record into ``owner`` first (from memory on the replica that created
        or checked the record, which is where its run starts)."""

        async def owned(emit: Emit) -> T:
            owner.principal, owner.read = await self.owner_of(kind, record_id), True
            return await run(emit)

        return owned

    async def run_owner(self, owner: RunOwner, kind: str, record_id: str) -> Principal | None:
        """The owner ``owner`` read as the run started; or, if it was not read, the record's owner now."""
        return owner.principal if owner.read else await self.owner_of(kind, record_id)

    async def owner_of(self, kind: str, record_id: str) -> Principal | None:
        """The owner of a run's record (its turn or response) as a principal, who owns the run's webhook delivery
        whoever ends the run (the lease sweep, an approver); None: unowned, gone, or unread (logged: the event
        matters more than who may list its delivery)."""
        try:
            return await self.guard.principal(kind, record_id)  # kept in memory since its create or check
        except Exception:
            log.exception("the owner of %s %s was not read; its webhook delivery is the server's", kind, record_id)
            return None

    def armed(self, run: Callable[[Emit], Awaitable[T]], armed: ArmedRun) -> Callable[[Emit], Awaitable[T]]:
        """``run``, arming its webhook's delivery first (see :meth:`Webhooks.arm`)."""
        webhooks = self.webhooks
        if webhooks is None:
            return run

        async def arming(emit: Emit) -> T:
            await webhooks.arm(armed)
            return await run(emit)

        return arming

    @contextlib.asynccontextmanager
    async def admitting(self, turn_id: str) -> AsyncIterator[None]:
        """Hold one of the caller's running-turn slots for ``turn_id`` while the block stores and launches it.

        The run the block launches frees the slot when it ends; a block that fails frees it at once, unless
        another block admitting the same turn (a racing resume) still goes on or launched it.

        Raises:
            RateLimitedError: the caller runs as many turns as its quota allows.
        """
        held = await self.quotas.admit_turn(turn_id)
        try:
            yield
        except BaseException:
            if held is not None:
                await asyncio.shield(self._free_slot(turn_id, refused=held))
            raise
        if held is not None:
            self.quotas.turn_launched(turn_id, held)

    async def _free_slot(self, turn_id: str, refused: HeldSlot | None = None) -> None:
        """Free the turn's slot as its run ends, or as an admission of it (``refused``) failed (see ``Quotas``)."""
        try:
            if refused is None:
                await self.quotas.turn_ended(turn_id)
            else:
                await self.quotas.turn_refused(turn_id, refused)
        except Exception:  # the slot's lease frees it later; the turn's outcome matters more
            log.exception("running-turn slot of %s not freed", turn_id)

    def launch(
        self,
        turn_id: str,
        stream: str,
        run: Callable[[Emit], Awaitable[Any]],
        encode: Encode,
        settle: Callable[[list[str]], Awaitable[None]],
        owners: tuple[str, ...],
        first_seq: int = 0,
        subject: S = None,  # type: ignore[assignment]
        counted: RunMetrics | None = None,
        metered: RunUsage | None = None,
    ) -> LiveRun[S]:
        """Run a turn in the background, its events encoded, numbered from ``first_seq`` and published.

        Args:
            turn_id: The turn.
            stream: The name of its event stream.
            run: The engine call, given where to emit events.
            encode: The façade's encoder.
            settle: Stores the run's outcome with its events (however the run ended).
            owners: Agent, session or response ids the run is cancelled by.
            first_seq: The number of the run's first event (a resume continues the numbering).
            subject: What the façade keeps of the run, on :attr:`LiveRun.subject`.
            counted: What the run adds to the metrics (default: an Agents API turn's).
            metered: Counts the run's token usage, stored (in :attr:`ledger`, in the background) once the run's
                outcome is.
        """
        events: list[str] = []
        counted = counted or RunMetrics("agents")

        async def body(live: LiveRun[S]) -> Any:
            async def emit(event: EngineEvent) -> None:
                counted.saw(event)
                if metered is not None:
                    metered.saw(event)
                for data in encode(event, first_seq + len(events)):
                    seq = first_seq + len(events)
                    events.append(data)
                    live.channel.hold(StoredEvent(seq, data))
                    self.fanout.publish(stream, seq, data, live.channel)  # releases it once stored

            counted.started()
            outcome = await run(emit)
            counted.returned(outcome)
            return outcome

        async def finish(live: LiveRun[S]) -> None:
            try:
                kept = await _published(live, events)
                await settle(kept)
                if kept:  # storage holds them now: those the fan-out could not store in time go out too
                    live.channel.stored(first_seq + len(kept) - 1)
            finally:
                counted.ended()
                if events:
                    self.fanout.end_run(stream, first_seq + len(events) - 1, live.channel)
                if metered is not None and self.ledger is not None:
                    self.ledger.submit(metered)  # not awaited: the stream ends without a storage write
                await self._free_slot(turn_id)

        return self.runner.start(
            turn_id, body, stream=stream, settle=finish, owners=owners, first_seq=first_seq, subject=subject
        )

    @contextlib.asynccontextmanager
    async def launching(self, stream: str) -> AsyncIterator[None]:
        """Mark ``stream`` as about to be launched here by the block: a reader that comes meanwhile (the repeat
        of a keyed request, whose key the block stored with its run) waits for the launch instead of finding
        nothing live."""
        # One marker per block: a keyed repeat racing its first call (a resume: both name the turn's stream) marks
        # the stream too, and its failure (the key found held) must leave the first call's marker standing.
        started = _Launch()
        markers = self._launching.setdefault(stream, [])
        markers.append(started)
        try:
            yield
        except BaseException:
            started.failed = True
            raise
        finally:
            markers.remove(started)
            if not markers and self._launching.get(stream) is markers:
                del self._launching[stream]
            started.set()

    def live(self, stream: str) -> LiveRun[Any] | None:
        """The run live in this process on ``stream``."""
        return self.runner.on_stream(stream)

    async def events(
        self, stream: str, after: int, stored_after: StoredAfter, is_running: Callable[[], Awaitable[bool]]
    ) -> AsyncIterator[StoredEvent]:
        """A stream's events numbered above ``after``: stored ones, then live ones until the run ends.

        The run may be live here (its channel), or elsewhere: finished, or run
        by another replica (storage, then the fan-out, while ``is_running``).

        Raises:
            RunNotStartedError: the run was being launched here, and its launch failed.
        """
        live = self.live(stream)
        starting = list(self._launching.get(stream, ())) if live is None else []
        if starting:
            await asyncio.gather(*(launch.wait() for launch in starting))
            live = self.live(stream)
            if live is None and all(launch.failed for launch in starting):
                raise RunNotStartedError(f"the run of {stream} was not started: the request that started it failed")
        if live is None:
            return follow_elsewhere(self.fanout, stream, after, stored_after, is_running)
        earlier = await stored_after(after) if live.first_seq > after + 1 else []
        earlier = [event for event in earlier if event.seq < live.first_seq]
        return self._from_live(live, after, earlier, stored_after, is_running)

    async def _from_live(
        self,
        live: LiveRun[Any],
        after: int,
        earlier: list[StoredEvent],
        stored_after: StoredAfter,
        is_running: Callable[[], Awaitable[bool]],
    ) -> AsyncIterator[StoredEvent]:
        """The events before a live run's, then its own; then, if another replica ended its stream, theirs."""
        last = after
        for event in earlier:
            last = event.seq
            yield event
        async for event in live.channel.read(start=max(0, after + 1 - live.first_seq)):
            last = event.seq
            yield event
        if live.channel.lost:  # the run goes on here a while, but its stream ends with another replica's failure
            async for event in follow_elsewhere(self.fanout, live.stream, last, stored_after, is_running):
                yield event

    async def stop(self, live: LiveRun[Any], reason: str) -> None:
        """Cancel a run of this process and wait until its outcome is stored."""
        await self.runner.cancel(live.turn_id, reason)

    async def cancel_everywhere(self, owner: str, reason: str) -> None:
        """Cancel the turns run for ``owner`` here (waiting until they recorded it) and on every other replica."""
        await self.runner.cancel_owned_by(owner, reason)
        await self.fanout.notify(CancelTurns(owner, reason))

    def on_abandoned(
        self, owns: Callable[[ExpiredTurn], bool], close: Callable[[ExpiredTurn], Awaitable[None]]
    ) -> None:
        """Call ``close`` for each turn a dead replica left that ``owns`` picks (see :meth:`close_abandoned`)."""

        async def handler(turns: list[ExpiredTurn]) -> None:
            for turn in turns:
                if owns(turn):
                    try:
                        await close(turn)
                    except Exception:  # one turn's trouble must not keep the others open
                        log.exception("events of abandoned turn %s not closed", turn.turn_id)

        self.leases.on_abandoned(handler)

    async def close_abandoned(
        self,
        stream: str,
        stored: int,
        failure: Callable[[int], list[str]],
        save: Callable[[list[str]], Awaitable[None]],
    ) -> None:
        """Store what a dead replica streamed past the ``stored`` events, ending the stream with its failure.

        The failure is numbered after the last event of the shared stream (every
        event a client may have received is there) and appended to it first, only
        if no other event took that number meanwhile (a replica that only stalled
        may still be writing): the stream decides what the turn's events are.

        Args:
            stream: The stream's name.
            stored: How many of its events are stored already.
            failure: The failure event(s) that end the stream, numbered from the given number.
            save: Stores the events from number ``stored`` on.

        Raises:
            ConflictError: the stream kept growing past every attempt to end it.
        """
        for _ in range(_CLOSE_ATTEMPTS):
            events = contiguous(await self.fanout.recorded(stream, stored - 1), stored)
            first_failure = stored + len(events)
            closing = failure(first_failure)
            if await self.fanout.append(stream, first_failure, closing):
                await save([*events, *closing])
                return
        raise ConflictError(f"stream {stream} kept growing while its failure was being appended")


async def _published(live: LiveRun[Any], events: list[str]) -> list[str]:
    """The run's events to store once the fan-out stored them (or took too long).

    Those the shared stream took, if another replica ended it first (it failed the turn
    while this replica stalled): the rest are its no more.
    """
    with contextlib.suppress(TimeoutError):  # a Redis that went away: storage is where they replay from
        async with asyncio.timeout(PUBLISH_WAIT_SECONDS):
            await live.channel.drained()
    return events[: len(live.channel.events)] if live.channel.lost else events
