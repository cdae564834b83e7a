"""Turn leases: how a replica shows its turns are alive, and how the others notice when it died.

Every running turn carries a lease end in storage. Each replica renews the
leases of the turns it runs and, on the same beat, fails any running turn
whose lease ran out: its replica stopped without finishing it. A crashed
replica's turn is therefore failed within ``seconds`` plus one beat.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from ferryman.engine.channel import TurnRunner
from ferryman.errors import FerrymanError
from ferryman.ids import utcnow
from ferryman.metrics import instruments as metrics
from ferryman.storage.base import ExpiredTurn, Store

log = logging.getLogger(__name__)

ABANDONED = "the server running the turn stopped before it finished"
LEASE_LOST = "this replica lost the turn's lease (it stalled too long), and another failed the turn"

AbandonedHandler = Callable[[list[ExpiredTurn]], Awaitable[None]]
"""Told about the turns a beat failed, to finish their event streams."""


class TurnLeases:
    """Renews this replica's leases and fails the turns whose lease ran out.

    Args:
        store: Where turns and their leases are stored.
        runner: The turns running in this process.
        seconds: How long a lease lasts without renewal.
        sole_process: This process alone runs the store's turns (SQLite): at start,
            every turn still marked running was left by an earlier run of it, so
            it is failed at once rather than when its lease runs out.
    """

    def __init__(self, store: Store, runner: TurnRunner, seconds: float = 30.0, sole_process: bool = False) -> None:
        self.seconds = seconds
        self._sole_process = sole_process
        self._store = store
        self._runner = runner
        self._task: asyncio.Task[None] | None = None
        self._handlers: list[AbandonedHandler] = []
        self._unrenewed: set[str] = set()

    def on_abandoned(self, handler: AbandonedHandler) -> None:
        """Call ``handler`` with the turns each beat fails."""
        self._handlers.append(handler)

    @property
    def beat(self) -> float:
        """Seconds between renewals (and sweeps): a third of a lease, so one late beat loses nothing."""
        return self.seconds / 3

    def until(self) -> datetime:
        """The end of a lease taken now."""
        return utcnow() + timedelta(seconds=self.seconds)

    async def start(self) -> None:
        """Fail what an earlier process left running, then beat in the background."""
        if self._sole_process:
            await self._fail_and_close(utcnow() + timedelta(days=365 * 100))
        await self.beat_once()
        self._task = asyncio.create_task(self._beat_forever(), name="turn-leases")

    async def stop(self) -> None:
        """Stop beating."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def beat_once(self) -> list[ExpiredTurn]:
        """Renew this replica's leases, then fail the expired turns and tell the handlers; return those."""
        running = self._runner.running()
        if running:
            await self._stop_lost(await self._store.renew_leases(running, self.until()))
        return await self._fail_and_close(utcnow())

    async def _fail_and_close(self, now: datetime) -> list[ExpiredTurn]:
        failed = await self._store.fail_expired_turns(now, ABANDONED)
        metrics.leases_expired("turn", len(failed))
        if failed:
            ids = ", ".join(turn.turn_id for turn in failed)
            log.warning("failed %d turn(s) whose replica stopped: %s", len(failed), ids)
            for handler in self._handlers:
                try:
                    await handler(failed)
                except Exception:  # each handler gets its turn whatever the others do
                    log.exception("closing abandoned turns failed")
        return failed

    async def _stop_lost(self, unrenewed: list[str]) -> None:
        """Cancel the turns this replica still runs although storage says they ended.

        A turn that just finished is not renewed either, for the moment before its
        task ends; one left unrenewed on two beats in a row was failed by another
        replica while this one stalled past its lease, and must not go on writing.
        """
        lost = [turn_id for turn_id in unrenewed if turn_id in self._unrenewed]
        self._unrenewed = set(unrenewed) - set(lost)
        for turn_id in lost:
            log.warning("turn %s lost its lease; cancelling it here", turn_id)
            await self._runner.cancel(turn_id, LEASE_LOST)

    async def _beat_forever(self) -> None:
        # Sleep first: ``start`` has just beaten. A stop soon after start then cancels a sleep, not a store
        # call (a Redis client can swallow a cancellation that lands mid-command, and the task never ends).
        while True:
            await asyncio.sleep(self.beat)  # the beat is a period, not a wait for an event
            try:
                await self.beat_once()
            except (FerrymanError, OSError) as exc:
                log.warning("turn leases not renewed: %s", exc)
            except Exception:
                log.exception("turn leases not renewed")
