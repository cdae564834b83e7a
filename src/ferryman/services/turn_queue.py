"""Double-texting: a turn that arrives while another runs in its session waits its turn, or interrupts it.

The queue is the session's turns themselves: a turn sent with ``multitask_strategy``
``enqueue`` or ``interrupt`` is stored at once with the status ``queued``, under a lease
its replica renews like a running turn's (a replica that dies leaves it to the lease
sweep, which fails it, so the queue moves on). The oldest queued turn of the session
starts once none runs, by the store's compare-and-set from ``queued`` to
``in_progress`` (the same one-running-turn rule every start obeys), wherever it was
sent: each waiting replica re-reads the session's queue (its running and queued turns'
ids, an index read) when the run it waits behind ends (its task here, or the end of its
stream through the fan-out elsewhere). A turn sent without a strategy while turns wait
queued is refused by the store: it does not overtake them.

Interrupting or rolling back another turn is a write to it: the caller must be allowed to
update (interrupt) or delete (rollback) the running turn, checked before the new turn is
stored (``check``) and again before each cancel.

``rollback`` goes further than ``interrupt``: the cancelled turn is deleted once its run ended, its
steps, history messages and events with it, so that no later turn reads it. A run on another replica that is
alive (its lease renewed) yet does not stop is waited for at most ``storage.rollback_wait_seconds``: the
rolling-back turn then fails ``conflict``, naming the setting, and the cancelled turn is left as it ends, not
deleted. The wait is the rolling-back turn's own: cancelling it (its session deleted, its response cancelled)
ends it at once.

A queued turn's stream starts when the turn starts: until then it has no event, so a
client sees no new kind of event (only the keep-alive comments every stream gets).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime

from opentelemetry.trace import Span

from ferryman.api.agents import MultitaskStrategy, TurnError, TurnStatus
from ferryman.auth.policy import Action
from ferryman.auth.principal import current_principal
from ferryman.coordination.base import Fanout
from ferryman.engine.channel import StopReason, TurnRunner
from ferryman.engine.events import Emit, TurnFailed
from ferryman.engine.tracing import running_turn
from ferryman.errors import ConflictError, FailureCode, FerrymanError, NotFoundError
from ferryman.ids import utcnow
from ferryman.storage.base import Store, TurnRecord

from .record_guard import RecordGuard

RECHECK_SECONDS = 1.0
"""The longest a queued turn waits before reading its session again, should no end of a run wake it first (a run
on another replica whose end was not seen, a queued turn ahead of it on another replica that has not started yet)."""

ROLLBACK_WAIT_SECONDS = 60.0
"""How long a rollback waits by default for the turn it cancelled to stop (``storage.rollback_wait_seconds``)."""

ENDED_STREAM_SECONDS = 10.0
"""How long a rollback waits, once the turn it cancelled stopped, for that run's stream to end (its events stored)
before deleting the turn."""


class TurnQueue:
    """Waits for a queued turn's start, and interrupts a session's running turn.

    Args:
        store: Where the session's turns are.
        guard: The access step on turns: stopping another turn is checked on it.
        runner: The runs of this process (a run here is awaited on its task).
        fanout: The ends of runs on other replicas.
        stream_of: The name of a turn's event stream, by its id (None: not known).
        cancel: Cancels the runs of an owner (a turn id) here and on every other replica, waiting for those here.
        rollback_wait: The most seconds a rollback waits for the turn it cancelled to stop
            (``storage.rollback_wait_seconds``).
    """

    def __init__(
        self,
        store: Store,
        guard: RecordGuard,
        runner: TurnRunner,
        fanout: Fanout,
        stream_of: Callable[[str], Awaitable[str | None]],
        cancel: Callable[[str, str], Awaitable[None]],
        rollback_wait: float = ROLLBACK_WAIT_SECONDS,
    ) -> None:
        self._store = store
        self._guard = guard
        self._runner = runner
        self._fanout = fanout
        self._stream_of = stream_of
        self._cancel = cancel
        self._rollback_wait = rollback_wait

    async def check(self, session_id: str, strategy: MultitaskStrategy) -> None:
        """Refuse a strategy that would stop a turn the caller may not stop, before anything is stored.

        Raises:
            NotFoundError: the caller may not read the session's running turn.
            ForbiddenError: it may read it, but not update (interrupt) or delete (rollback) it.
        """
        if strategy in ("interrupt", "rollback"):
            for turn_id, status in await self._store.session_queue(session_id):
                if status == "in_progress":
                    await self._may_stop(strategy, turn_id)

    async def take_turn(
        self,
        record: TurnRecord,
        strategy: MultitaskStrategy,
        span: Span | None,
        emit: Emit,
        lease_until: Callable[[], datetime],
        started: Callable[[], Awaitable[None]] | None = None,
    ) -> bool:
        """Make way for a queued turn as ``strategy`` says, and wait until it runs; whether it does.

        On success the record is ``in_progress`` under its new lease, and ``started`` (what the run reads once
        it starts: its history) has run. A turn that never leaves the queue (cancelled, deleted, or failed by
        the lease sweep while it waited), or whose ``started`` failed, is stored failed, its failure emitted,
        and False answered: its run has nothing more to do.
        """
        try:
            if strategy == "interrupt":
                await self.interrupt(record.session_id, f"interrupted by turn {record.turn_id}")
            elif strategy == "rollback":
                await self.rollback(record.session_id, f"rolled back by turn {record.turn_id}")
            claimed = await self.wait_to_start(record.session_id, record.turn_id, lease_until)
            record.status, record.lease_until = "in_progress", claimed.lease_until
            if started is not None:
                await started()
        except asyncio.CancelledError as exc:
            reason = exc.args[0] if exc.args and isinstance(exc.args[0], StopReason) else None
            reason = reason or StopReason(FailureCode.CANCELLED, "the turn was cancelled while queued")
            await asyncio.shield(self._unqueued(record, span, reason, emit))
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return False
        except FerrymanError as exc:
            await self._unqueued(record, span, StopReason(exc.code, exc.message), emit)
            return False
        except Exception:  # never left queued (or running) behind: the sweep would take a lease's time
            await self._unqueued(record, span, StopReason(FailureCode.INTERNAL_ERROR, "the turn could not start"), emit)
            raise
        return True

    async def _unqueued(self, record: TurnRecord, span: Span | None, reason: StopReason, emit: Emit) -> None:
        """Fail a turn that never left the queue (or never got to run), announcing it on its stream."""
        record.status, record.completed_at = "failed", utcnow()
        record.error = TurnError(code=reason.code, message=reason.message)
        with running_turn(span, record):  # ends the span with the turn's outcome
            with contextlib.suppress(FerrymanError):  # deleted meanwhile: nothing left to store
                await self._store.finish_turn(record)
            await emit(TurnFailed(record.turn_id, reason.code, reason.message))

    async def interrupt(self, session_id: str, reason: str) -> None:
        """Cancel the turn running in the session, if one does (it keeps its completed steps).

        Raises:
            NotFoundError, ForbiddenError: the caller may not update the running turn (nothing is cancelled).
        """
        for turn_id, status in await self._store.session_queue(session_id):
            if status == "in_progress":
                await self._may_stop("interrupt", turn_id)
                await self._cancel(turn_id, reason)

    async def rollback(self, session_id: str, reason: str) -> None:
        """Cancel the turn running in the session, if one does, and delete it once its run ended.

        Its run is awaited to its very end (its events stored, wherever it ran) before the turn is deleted, so
        that nothing it writes late brings any of it back (a replica that died leaves it to the lease sweep).

        Raises:
            NotFoundError, ForbiddenError: the caller may not delete the running turn (nothing is cancelled).
            ConflictError: the cancelled turn did not stop within ``storage.rollback_wait_seconds`` (it is kept).
        """
        for turn_id, status in await self._store.session_queue(session_id):
            if status == "in_progress":
                await self._may_stop("rollback", turn_id)
                await self._cancel(turn_id, reason)
                await self._ended(session_id, turn_id)
                with contextlib.suppress(NotFoundError):  # deleted meanwhile (its session, another rollback)
                    await self._store.delete_turn(session_id, turn_id)
                    self._guard.deleted(current_principal.get(), "turn", turn_id)

    async def _ended(self, session_id: str, turn_id: str) -> None:
        """Wait until a cancelled run of the turn has stopped and, if it ran elsewhere, ended its stream.

        Raises:
            ConflictError: it still runs after ``storage.rollback_wait_seconds``.
        """
        bound = asyncio.timeout(self._rollback_wait)
        try:
            async with bound:
                await self._stopped(session_id, turn_id)
        except TimeoutError:
            if not bound.expired():  # a store's own timeout, not the bound
                raise
            raise ConflictError(
                f"turn '{turn_id}' did not stop within storage.rollback_wait_seconds ({self._rollback_wait:g} s) "
                "of its cancellation; it was not rolled back"
            ) from None
        stream = await self._stream_of(turn_id)
        with contextlib.suppress(TimeoutError):  # a replica that died ends no stream: the sweep failed its turn
            async with asyncio.timeout(ENDED_STREAM_SECONDS):
                if stream is not None:
                    await self._fanout.wait_run_end(stream)

    async def _stopped(self, session_id: str, turn_id: str) -> None:
        """Return once the turn no longer runs (or is gone)."""
        while True:
            try:
                record = await self._store.get_turn_record(session_id, turn_id)
            except NotFoundError:
                return
            if record.status != "in_progress":
                return
            await self._behind(session_id, turn_id, "in_progress")

    async def wait_to_start(self, session_id: str, turn_id: str, lease_until: Callable[[], datetime]) -> TurnRecord:
        """Return once the queued turn runs (moved to ``in_progress`` under a new lease), its record.

        Raises:
            NotFoundError: the turn (or its session) was deleted while it waited.
            ConflictError: the turn is no longer queued (the lease sweep failed it).
        """
        while True:
            live = await self._store.session_queue(session_id)
            if (turn_id, "queued") not in live:
                record = await self._store.get_turn_record(session_id, turn_id)  # NotFoundError: deleted
                raise ConflictError(f"turn '{turn_id}' is no longer queued (status: {record.status})")
            running = next((other for other, status in live if status == "in_progress"), None)
            head = next(other for other, status in live if status == "queued")
            if running is None and head == turn_id:
                with contextlib.suppress(ConflictError):  # another turn took the slot first: wait behind it
                    claimed = await self._store.claim_resume(session_id, turn_id, lease_until(), expected="queued")
                    return claimed.record
                continue
            await self._behind(session_id, running or head, "queued" if running is None else "in_progress")

    async def _behind(self, session_id: str, ahead: str, status: TurnStatus) -> None:
        """Wait until the run of the turn ``ahead`` ends (or, for one not seen to run, a while)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RECHECK_SECONDS):
                task = self._runner.task(ahead)
                if task is not None:
                    await asyncio.wait([task])
                    return
                stream = await self._stream_of(ahead) if status == "in_progress" else None
                if stream is not None:
                    await self._fanout.wait_run_end(stream)
                    # The fan-out answers at once for a stream it does not know (a run that has not
                    # published yet, or one process alone): only an ended run ends the wait early.
                    try:
                        record = await self._store.get_turn_record(session_id, ahead)
                    except NotFoundError:
                        return
                    if record.status != "in_progress":
                        return
                await asyncio.Event().wait()  # until the timeout: then the session is read again

    async def _may_stop(self, strategy: MultitaskStrategy, turn_id: str) -> None:
        """Check the caller may interrupt (update) or roll back (delete) the turn."""
        action: Action = "delete" if strategy == "rollback" else "update"
        await self._guard.check(current_principal.get(), action, "turn", turn_id)
