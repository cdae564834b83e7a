"""Ending the Agents API's turns a dead replica left, and the runs whose ends were never queued for their webhooks."""

from __future__ import annotations

import logging

from ferryman.engine.events import TurnFailed
from ferryman.errors import FailureCode, FerrymanError, NotFoundError
from ferryman.storage.base import ExpiredTurn
from ferryman.webhooks.outbox import ArmedRun

from .host import TurnHost
from .leases import ABANDONED
from .turn_reads import stream
from .turn_runs import TurnRuns
from .turn_stream import turn_event_data
from .webhooks import kept_webhook

log = logging.getLogger(__name__)


class TurnRecovery:
    """Closes abandoned turns, and queues the ends of runs their replicas left untold.

    Args:
        host: Storage and the turns' event streams.
        runs: Queues a run's end for its webhook.
    """

    def __init__(self, host: TurnHost, runs: TurnRuns) -> None:
        self._host = host
        self._store = host.store
        self._runs = runs

    async def close_abandoned(self, turn: ExpiredTurn) -> None:
        """Store what a dead replica streamed of a turn, end the stream with the turn's failure, and queue the
        failure for the webhook of the run it ended (the dead replica's task never will)."""
        turn_id = turn.turn_id
        try:
            stored = await self._store.turn_event_count(turn_id)

            def failure(seq: int) -> list[str]:
                return turn_event_data(TurnFailed(turn_id, FailureCode.INTERRUPTED, ABANDONED), seq)

            async def save(events: list[str]) -> None:
                await self._store.save_turn_events(turn_id, stored, events)

            await self._host.close_abandoned(stream(turn_id), stored, failure, save)
        finally:  # failed in storage, whatever became of its stream
            await self._queue_abandoned(turn)

    async def _queue_abandoned(self, turn: ExpiredTurn) -> None:
        """Queue the failure of a turn a dead replica left for the webhook its run's request named, if any."""
        if turn.session_id is None:
            return
        try:
            record = await self._store.get_turn_record(turn.session_id, turn.turn_id)
        except FerrymanError as exc:  # deleted meanwhile: nothing is left to tell
            log.warning("the webhook of turn %s was not queued: %s", turn.turn_id, exc.message)
            return
        hook = kept_webhook(record.overrides)
        if hook is not None:
            await self._runs.queue_end(record, hook)

    async def recover_end(self, run: ArmedRun) -> bool:
        """Queue the end of an armed run of a turn that ended without queueing it; False while the run goes on."""
        try:
            record = await self._store.get_turn_record(run.session_id or "", run.run_id)
        except NotFoundError:  # deleted: nothing is left to tell
            return True
        hook = kept_webhook(record.overrides)
        if hook is None or hook.run_key != run.run_key:  # a later run replaced it: its end is no longer stored
            log.warning("the end of run %s of turn %s was not queued, and is lost", run.run_key, run.run_id)
            return True
        if record.status in ("in_progress", "queued"):
            return False
        await self._runs.queue_end(record, hook)
        return True
