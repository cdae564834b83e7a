"""Ending responses from outside their runs: a client's cancel or delete, and the responses a dead replica left.

A response running in this process is stopped here; one running on another replica is asked to stop through the
fan-out (``CancelTurns``), and followed until it stored its outcome. A dead replica's responses are failed in
storage and their webhooks told, since the dead replica's task never will.
"""

from __future__ import annotations

import logging

from ferryman.api.responses import Response
from ferryman.auth.principal import current_principal
from ferryman.coordination.base import CancelTurns, RecordDeleted
from ferryman.errors import FerrymanError, InvalidRequestError, NotFoundError
from ferryman.storage.base import ExpiredTurn, ResponseRecord
from ferryman.webhooks.outbox import ArmedRun

from ..approval_holds import ApprovalHolds
from ..host import TurnHost
from ..leases import ABANDONED
from ..webhooks import RESPONSE_EVENTS, stored_webhook
from .history import HistoryCache
from .included import shown_response
from .reads import RUNNING, ResponseReads
from .runs import ResponseRuns, stream
from .stream import ResponseEncoder

log = logging.getLogger(__name__)


class ResponseStops:
    """Cancels and deletes responses, and closes those a dead replica abandoned.

    Args:
        host: Storage, the runner, the fan-out and the webhooks' outbox.
        cache: Finished responses' histories, a deleted one's dropped.
        holds: The approval inbox, told of deleted responses (None: no inbox).
        reads: Finds a response's run, and follows its events until it ends.
        runs: Tells of the sessions that end with a deleted response.
    """

    def __init__(
        self,
        host: TurnHost,
        cache: HistoryCache,
        holds: ApprovalHolds | None,
        reads: ResponseReads,
        runs: ResponseRuns,
    ) -> None:
        self._host = host
        self._store = host.store
        self._fanout = host.fanout
        self._cache = cache
        self._holds = holds
        self._reads = reads
        self._runs = runs

    async def cancel(self, response_id: str) -> Response:
        """Cancel a background response; cancelling a finished one changes nothing."""
        stored = await self._reads.record(response_id, "update")  # before stopping anything, even a live one
        live = self._reads.live(response_id)
        record = live.subject.record if live is not None else stored
        if not record.background:
            raise InvalidRequestError("only background responses can be cancelled", "response_id")
        if live is not None:
            await self._host.stop(live, "cancelled by the client")
        else:
            await self._stop_elsewhere(record, "cancelled by the client")
        return shown_response((await self._store.get_response(response_id)).response, None)

    async def delete(self, response_id: str) -> None:
        """Delete a response (cancelling it first if it still runs)."""
        stored = await self._reads.record(response_id, "delete")  # before stopping anything, even a live one
        live = self._reads.live(response_id)
        if live is not None:
            await self._host.stop(live, "the response was deleted")
        else:
            await self._stop_elsewhere(stored, "the response was deleted")
        await self._store.delete_response(response_id)
        self._host.guard.deleted(current_principal.get(), "response", response_id)
        if self._host.webhooks is not None:
            await self._host.webhooks.forget(run_id=response_id)
        self._cache.drop(response_id)
        if self._holds is not None:
            await self._holds.response_deleted(stored.response)
        await self._runs.session_ended(stored)
        await self._fanout.notify(RecordDeleted(response_id, "response"))

    async def _stop_elsewhere(self, record: ResponseRecord, reason: str) -> None:
        """Ask the replica running a response to cancel it, and wait until it stored the outcome."""
        if record.response.status not in RUNNING:
            return
        await self._fanout.notify(CancelTurns(record.response.id, reason))
        async for _ in await self._reads.events(record.response.id, -1):
            pass

    async def close_abandoned(self, turn: ExpiredTurn) -> None:
        """Store what a dead replica streamed of a response, ending the stream with ``response.failed``, and
        queue the failure for the webhook its request named (the dead replica's task never will)."""
        assert turn.response_id is not None
        record = await self._store.get_response(turn.response_id)
        encoder = ResponseEncoder(record.response, set())

        def failure(seq: int) -> list[str]:
            return encoder.fail_abandoned(seq, ABANDONED)

        async def save(events: list[str]) -> None:
            await self._store.finish_response(record, events, [])

        try:
            # Responses store their events when they end: none is stored yet.
            await self._host.close_abandoned(stream(turn.response_id), 0, failure, save)
        finally:  # failed in storage, whatever became of its stream
            await self._queue_abandoned(record)

    async def recover_end(self, run: ArmedRun) -> bool:
        """Queue the end of an armed response that ended without queueing it; False while it goes on."""
        try:
            record = await self._store.get_response(run.run_id)
        except NotFoundError:  # deleted: nothing is left to tell
            return True
        if record.response.status in RUNNING:
            return False
        await self._queue_abandoned(record)
        return True

    async def _queue_abandoned(self, record: ResponseRecord) -> None:
        """Queue the failure of a response a dead replica left for the webhook its request named, if any."""
        response_id = record.response.id
        try:
            hook = await stored_webhook(self._store, record.session_id, record.turn_id)
            if hook is None:
                return
            response = (await self._store.get_response(response_id)).response
        except FerrymanError as exc:  # deleted meanwhile: nothing is left to tell
            log.warning("the webhook of response %s was not queued: %s", response_id, exc.message)
            return
        shown = shown_response(response, None).model_dump(mode="json")
        event = RESPONSE_EVENTS.get(response.status)
        owner = await self._host.owner_of("response", response_id)
        await self._host.notify(hook.url, hook.run_key, response_id, event, shown, owner)
